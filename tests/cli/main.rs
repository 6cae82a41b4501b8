//! Integration tests: the real `nicbench` binary against a real agent.
//! One test binary; one module per area. Tests that need root and iproute2
//! (the lab) say why they skip instead of passing silently.

mod common;
mod demo;
mod facts;
mod hostile;
mod lab;
mod rawclient;
mod repeat;
mod rr;
mod service;
mod sweep;
mod tcp;
mod udp;
