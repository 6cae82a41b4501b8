//! QUIC with a new connection per transaction (`rr --crr`): every
//! connection of an end comes from its one endpoint, which the stream
//! threads drive in turn, and each pays QUIC's handshake (TLS 1.3 in its
//! packets).

use std::sync::Arc;

use bytes::Bytes;
use quinn::VarInt;
use socket2::Socket;

use super::endpoint::{Dialer, Listening, Local, CLOSE_ABORTED, ENDPOINT_CLOSED};
use super::DEFAULT_CONGESTION;
use crate::workload::base::runner::TaskEnd;
use crate::workload::base::{Aborter, AgentNet, ClientNet, WorkloadError};
use crate::workload::transport::stream::{ConnectOptions, Held, Hold};
use crate::workload::transport::tls::{self, TlsEnd};
use crate::workload::transport::transaction::{Answer, Answering, Dialing, TransactionServing, Transactions, POLL};
use crate::workload::transport::Configure;

/// An endpoint the stream threads drive: handed to them before they run,
/// its last closes delivered after.
trait Driven: Send + Sync + 'static {
    fn local(&self) -> &Local;
}

impl Driven for Dialer {
    fn local(&self) -> &Local {
        &self.local
    }
}

impl Driven for Listening {
    fn local(&self) -> &Local {
        Listening::local(self)
    }
}

/// What an end's streams share: the endpoint.
struct Driving<T: Driven>(Arc<T>);

impl<T: Driven> Hold for Driving<T> {
    fn start(&self) {
        self.0.local().driver.hand_over();
    }

    fn finish(&self) {
        self.0.local().settle();
    }
}

/// The streams of an end over `driven`'s endpoint.
fn transactions<T: Driven, E>(driven: Arc<T>, ends: Vec<(u32, E)>) -> Transactions<E> {
    let endpoint = driven.local().endpoint.clone();
    let aborter: Aborter = Arc::new(move || endpoint.close(VarInt::from_u32(CLOSE_ABORTED), b"aborted"));
    Transactions {
        ends,
        buffers: driven.local().buffers.clone(),
        held: Held(Box::new(Driving(driven))),
        aborter: Some(aborter),
    }
}

/// The agent's endpoint, and the cipher suite the spec names.
pub struct QuicAnswers {
    listening: Listening,
    cipher: &'static str,
}

impl QuicAnswers {
    pub fn bind(net: &AgentNet, options: &ConnectOptions) -> Result<QuicAnswers, WorkloadError> {
        let congestion = options.congestion.unwrap_or(DEFAULT_CONGESTION);
        Ok(QuicAnswers {
            listening: Listening::bind(net, options.side, congestion, 1)?,
            cipher: options.tls.cloned().unwrap_or_default().cipher.suite_name(),
        })
    }
}

impl TransactionServing for QuicAnswers {
    fn port(&self) -> u16 {
        self.listening.port()
    }

    fn accept(self: Box<Self>, ids: &[u32]) -> Result<Transactions<Box<dyn Answering>>, WorkloadError> {
        let listening = Arc::new(self.listening);
        let ends = ids
            .iter()
            .map(|&id| {
                let answering = QuicAnswering {
                    listening: Arc::clone(&listening),
                    ids: ids.to_vec(),
                    cipher: self.cipher,
                    response: Bytes::new(),
                    handshakes: None,
                };
                (id, Box::new(answering) as Box<dyn Answering>)
            })
            .collect();
        Ok(transactions(listening, ends))
    }
}

/// One agent stream's turn at the endpoint.
struct QuicAnswering {
    listening: Arc<Listening>,
    ids: Vec<u32>,
    cipher: &'static str,
    /// The response as quinn takes it, made once.
    response: Bytes,
    handshakes: Option<TlsEnd>,
}

impl Answering for QuicAnswering {
    fn answer(&mut self, request: &mut [u8], response: &[u8], _: &mut dyn FnMut(&Socket)) -> Answer {
        if self.response[..] != *response {
            self.response = Bytes::copy_from_slice(response);
        }
        let served = self.listening.local().driver.block_on(self.listening.transact(
            &self.ids,
            self.cipher,
            request,
            &self.response,
            POLL,
        ));
        match served {
            None => Answer::Nothing,
            Some(Ok(record)) => {
                self.handshakes
                    .get_or_insert_with(TlsEnd::default)
                    .add_handshake(&record);
                Answer::Answered
            }
            Some(Err(why)) if why == ENDPOINT_CLOSED => Answer::Closed,
            Some(Err(why)) => {
                log::debug!("a QUIC transaction was not answered: {why}");
                Answer::Nothing
            }
        }
    }

    fn finish(self: Box<Self>, end: &mut TaskEnd) {
        if let Some(record) = self.handshakes {
            tls::record_handshake(end, record, false);
        }
    }
}

/// The client's ends: one endpoint for every stream's connections.
pub fn dial(
    net: &ClientNet,
    port: u16,
    ids: &[u32],
    options: &ConnectOptions,
) -> Result<Transactions<Box<dyn Dialing>>, WorkloadError> {
    let tls = options.tls.cloned().unwrap_or_default();
    let congestion = options.congestion.unwrap_or(DEFAULT_CONGESTION);
    let dialer = Arc::new(Dialer::new(net, port, options.side, &tls, congestion, 1)?);
    let ends = ids
        .iter()
        .map(|&id| {
            let dialing = QuicDialing {
                dialer: Arc::clone(&dialer),
                id,
                request: Bytes::new(),
                handshakes: None,
            };
            (id, Box::new(dialing) as Box<dyn Dialing>)
        })
        .collect();
    Ok(transactions(dialer, ends))
}

/// One client stream's connections.
struct QuicDialing {
    dialer: Arc<Dialer>,
    id: u32,
    /// The request as quinn takes it, made once.
    request: Bytes,
    handshakes: Option<TlsEnd>,
}

impl Dialing for QuicDialing {
    fn connection(&self) -> String {
        "a new QUIC connection".into()
    }

    /// quinn's UDP socket is the endpoint's: no socket of the
    /// connection's own takes `configure`.
    fn transact(&mut self, _: Configure, request: &[u8], response: &mut [u8]) -> Result<(), String> {
        if self.request[..] != *request {
            self.request = Bytes::copy_from_slice(request);
        }
        let record = self
            .dialer
            .local
            .driver
            .block_on(self.dialer.transact(self.id, &self.request, response))?;
        self.handshakes
            .get_or_insert_with(TlsEnd::default)
            .add_handshake(&record);
        Ok(())
    }

    fn finish(self: Box<Self>, end: &mut TaskEnd) {
        if let Some(record) = self.handshakes {
            tls::record_handshake(end, record, true);
        }
    }
}
