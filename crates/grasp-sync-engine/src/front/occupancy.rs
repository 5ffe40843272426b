//! [`Occupancy`]: the open connections of a front, in total and per IP address, and the
//! refusal of a connection over either cap. The per-address map holds only addresses with an
//! open connection, so it never has more entries than the total cap.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The open connections of one front.
#[derive(Debug)]
pub struct Occupancy {
    max_total: usize,
    max_per_ip: usize,
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// Why a connection was turned away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The front holds its total number of connections.
    Full,
    /// The address holds its number of connections.
    TooManyFromAddress,
}

impl Refusal {
    /// The canned HTTP response sent before closing.
    pub fn response(self) -> &'static str {
        match self {
            Refusal::Full => {
                "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\n\
                 retry-after: 10\r\nconnection: close\r\ncontent-length: 21\r\n\r\n\
                 too many connections\n"
            }
            Refusal::TooManyFromAddress => {
                "HTTP/1.1 429 Too Many Requests\r\ncontent-type: text/plain\r\n\
                 retry-after: 10\r\nconnection: close\r\ncontent-length: 38\r\n\r\n\
                 too many connections from one address\n"
            }
        }
    }
}

/// One admitted connection; dropping it frees its place.
#[derive(Debug)]
pub struct Admission {
    occupancy: Arc<Occupancy>,
    ip: IpAddr,
}

impl Occupancy {
    /// An empty front with these caps (`max_per_ip` 0: no per-address cap).
    pub fn new(max_total: usize, max_per_ip: usize) -> Self {
        Occupancy {
            max_total,
            max_per_ip,
            open: Mutex::new(Open::default()),
        }
    }

    /// Takes a place for a connection from `ip`, or says why there is none.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Admission, Refusal> {
        let mut open = self.lock();
        if open.total >= self.max_total {
            return Err(Refusal::Full);
        }
        let from_ip = open.per_ip.get(&ip).copied().unwrap_or(0);
        if self.max_per_ip > 0 && from_ip >= self.max_per_ip {
            return Err(Refusal::TooManyFromAddress);
        }
        open.total += 1;
        open.per_ip.insert(ip, from_ip + 1);
        Ok(Admission {
            occupancy: Arc::clone(self),
            ip,
        })
    }

    /// Open connections in total.
    pub fn total(&self) -> usize {
        self.lock().total
    }

    /// Addresses with at least one open connection.
    pub fn addresses(&self) -> usize {
        self.lock().per_ip.len()
    }

    fn release(&self, ip: IpAddr) {
        let mut open = self.lock();
        open.total = open.total.saturating_sub(1);
        if let Some(count) = open.per_ip.get_mut(&ip) {
            *count -= 1;
            if *count == 0 {
                open.per_ip.remove(&ip);
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.occupancy.release(self.ip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([192, 0, 2, last])
    }

    #[test]
    fn caps_apply_in_total_and_per_address_and_places_come_back() {
        let occupancy = Arc::new(Occupancy::new(3, 2));
        let a1 = occupancy.admit(ip(1)).expect("first");
        let _a2 = occupancy
            .admit(ip(1))
            .expect("second from the same address");
        assert_eq!(
            occupancy.admit(ip(1)).map(|_| ()),
            Err(Refusal::TooManyFromAddress)
        );
        let _b1 = occupancy.admit(ip(2)).expect("another address");
        assert_eq!(occupancy.admit(ip(3)).map(|_| ()), Err(Refusal::Full));
        drop(a1);
        assert_eq!(occupancy.total(), 2);
        let _a3 = occupancy.admit(ip(1)).expect("a freed place");
    }

    #[test]
    fn addresses_without_connections_leave_the_map() {
        let occupancy = Arc::new(Occupancy::new(10, 0));
        let admissions: Vec<_> = (0..5)
            .map(|n| occupancy.admit(ip(n)).expect("admitted"))
            .collect();
        assert_eq!(occupancy.addresses(), 5);
        drop(admissions);
        assert_eq!((occupancy.total(), occupancy.addresses()), (0, 0));
    }

    #[test]
    fn no_per_address_cap_when_it_is_zero() {
        let occupancy = Arc::new(Occupancy::new(100, 0));
        let held: Vec<_> = (0..100)
            .map(|_| occupancy.admit(ip(1)).expect("admitted"))
            .collect();
        assert_eq!(held.len(), 100);
        assert_eq!(occupancy.admit(ip(1)).map(|_| ()), Err(Refusal::Full));
    }

    #[test]
    fn canned_responses_declare_their_body_length() {
        for refusal in [Refusal::Full, Refusal::TooManyFromAddress] {
            let text = refusal.response();
            let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
            let declared = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length: "))
                .and_then(|value| value.parse::<usize>().ok())
                .expect("content-length");
            assert_eq!(declared, body.len(), "{refusal:?}");
        }
    }
}
