//! The two protocols Sluice speaks, and a value kept for each ([`PerProtocol`]) in place of
//! pairs and two-element arrays indexed by position.

use std::ops::{Index, IndexMut};

/// Which side of Sluice: the MySQL or the PostgreSQL one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// The MySQL/MariaDB frontend and its backends.
    Mysql,
    /// The PostgreSQL frontend and its backends.
    Pgsql,
}

impl Protocol {
    /// `mysql` or `pgsql`, as ProxySQL's table and variable prefixes spell it.
    pub const fn prefix(self) -> &'static str {
        match self {
            Protocol::Mysql => "mysql",
            Protocol::Pgsql => "pgsql",
        }
    }

    /// `MySQL` or `PostgreSQL`, as log lines name the protocol.
    pub const fn name(self) -> &'static str {
        match self {
            Protocol::Mysql => "MySQL",
            Protocol::Pgsql => "PostgreSQL",
        }
    }
}

/// One `T` per protocol, read by [`Protocol`]:
///
/// ```
/// use sluice_core::{PerProtocol, Protocol};
/// let mut clients = PerProtocol::new(3, 5);
/// clients[Protocol::Pgsql] += 1;
/// assert_eq!(clients[Protocol::Pgsql], 6);
/// assert_eq!(clients.map(|n| n * 2), PerProtocol::new(6, 12));
/// assert_eq!(clients.iter().map(|(_, n)| n).sum::<i32>(), 9);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PerProtocol<T> {
    /// The MySQL side's.
    pub mysql: T,
    /// The PostgreSQL side's.
    pub pgsql: T,
}

impl<T> PerProtocol<T> {
    /// The MySQL side's value and the PostgreSQL side's.
    pub const fn new(mysql: T, pgsql: T) -> Self {
        PerProtocol { mysql, pgsql }
    }

    /// Each side's value made from the other's through `f`.
    pub fn map<U>(self, mut f: impl FnMut(T) -> U) -> PerProtocol<U> {
        PerProtocol {
            mysql: f(self.mysql),
            pgsql: f(self.pgsql),
        }
    }

    /// Both values by reference.
    pub fn as_ref(&self) -> PerProtocol<&T> {
        PerProtocol {
            mysql: &self.mysql,
            pgsql: &self.pgsql,
        }
    }

    /// Both values with their protocol, MySQL first.
    pub fn iter(&self) -> impl Iterator<Item = (Protocol, &T)> {
        [
            (Protocol::Mysql, &self.mysql),
            (Protocol::Pgsql, &self.pgsql),
        ]
        .into_iter()
    }
}

impl<T> Index<Protocol> for PerProtocol<T> {
    type Output = T;
    fn index(&self, p: Protocol) -> &T {
        match p {
            Protocol::Mysql => &self.mysql,
            Protocol::Pgsql => &self.pgsql,
        }
    }
}

impl<T> IndexMut<Protocol> for PerProtocol<T> {
    fn index_mut(&mut self, p: Protocol) -> &mut T {
        match p {
            Protocol::Mysql => &mut self.mysql,
            Protocol::Pgsql => &mut self.pgsql,
        }
    }
}
