//! Which tests of a mesh run together: rounds of disjoint pairs.
//!
//! The round-robin "circle" method pairs N hosts (N even; an odd N gets a
//! bye) in N-1 rounds so that every unordered pair meets exactly once and no
//! host is in two pairs of a round. Each pairing round runs twice, once in
//! each direction, so every ordered pair (A->B and B->A) is measured once and
//! no host carries two throughput tests at once: 2(N-1) rounds of N/2 tests
//! for an even N (2N rounds of (N-1)/2 tests for an odd N), not N(N-1) tests
//! one after another.
//!
//! With `overlap` (latency tests, which barely load a host) the two
//! directions of a pairing round run together: each host is then in at most
//! two tests at once, once as the client and once as the server.

/// One test of a round: indices of the sending (client) host and the
/// receiving (agent) host.
pub type Test = (usize, usize);

/// The rounds for `n` hosts, in order; each round's tests run at once.
pub fn rounds(n: usize, overlap: bool) -> Vec<Vec<Test>> {
    let pairings = pairings(n);
    let mut out = Vec::with_capacity(pairings.len() * 2);
    for (k, round) in pairings.iter().enumerate() {
        // Alternate which side sends first, so that no host always waits
        // for its turn as the sender.
        let forward: Vec<Test> = round
            .iter()
            .map(|&(a, b)| if k % 2 == 0 { (a, b) } else { (b, a) })
            .collect();
        let backward: Vec<Test> = forward.iter().map(|&(a, b)| (b, a)).collect();
        if overlap {
            out.push(forward.into_iter().chain(backward).collect());
        } else {
            out.push(forward);
            out.push(backward);
        }
    }
    out.retain(|r| !r.is_empty());
    out
}

/// Unordered pairs of `n` hosts in rounds (the circle method): host 0 stays,
/// the others rotate one place each round.
fn pairings(n: usize) -> Vec<Vec<(usize, usize)>> {
    if n < 2 {
        return Vec::new();
    }
    // A ghost host `n` makes an odd count even; its partner sits out.
    let m = if n % 2 == 0 { n } else { n + 1 };
    let mut ring: Vec<usize> = (1..m).collect();
    let mut rounds = Vec::with_capacity(m - 1);
    for _ in 0..m - 1 {
        let mut seats = Vec::with_capacity(m);
        seats.push(0);
        seats.extend(&ring);
        let round: Vec<(usize, usize)> = (0..m / 2)
            .map(|i| (seats[i], seats[m - 1 - i]))
            .filter(|&(a, b)| a < n && b < n)
            .collect();
        rounds.push(round);
        ring.rotate_right(1);
    }
    rounds
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn check(n: usize, overlap: bool) -> Vec<Vec<Test>> {
        let rounds = rounds(n, overlap);
        let mut seen = HashSet::new();
        for round in &rounds {
            let mut senders = HashSet::new();
            let mut receivers = HashSet::new();
            let mut anyone = HashSet::new();
            for &(a, b) in round {
                assert_ne!(a, b, "a host tests itself: {round:?}");
                assert!(a < n && b < n);
                assert!(seen.insert((a, b)), "({a}, {b}) twice");
                assert!(
                    senders.insert(a) && receivers.insert(b),
                    "a host in two tests of one role: {round:?}"
                );
                if !overlap {
                    assert!(
                        anyone.insert(a) && anyone.insert(b),
                        "a host in two tests at once: {round:?}"
                    );
                }
            }
        }
        assert_eq!(seen.len(), n * (n - 1), "every ordered pair once");
        rounds
    }

    #[test]
    fn every_ordered_pair_once_and_no_host_twice_in_a_round() {
        for n in 2..=17 {
            let rounds = check(n, false);
            let expected = if n % 2 == 0 { 2 * (n - 1) } else { 2 * n };
            assert_eq!(rounds.len(), expected, "n = {n}");
            let per_round = n / 2;
            assert!(rounds.iter().all(|r| r.len() == per_round), "n = {n}: {rounds:?}");
        }
    }

    #[test]
    fn overlap_halves_the_rounds() {
        for n in 2..=12 {
            let rounds = check(n, true);
            let expected = if n % 2 == 0 { n - 1 } else { n };
            assert_eq!(rounds.len(), expected, "n = {n}");
        }
    }

    #[test]
    fn fewer_than_two_hosts_have_nothing_to_test() {
        assert!(rounds(0, false).is_empty());
        assert!(rounds(1, false).is_empty());
    }
}
