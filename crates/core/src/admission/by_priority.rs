//! The order in which sessions waiting for a backend connection are served, for both
//! protocols' pools: by their statement's workload-class priority, then arrival. A later, more
//! urgent waiter goes ahead of less urgent ones, but each waiter can be overtaken at most
//! [`MAX_OVERTAKES`] times; after that nobody goes ahead of it, so a low class waits longer
//! under contention but is never starved.

use crate::config::Priority;
use std::collections::VecDeque;

/// How often a waiting session may be overtaken by later arrivals of a more urgent class;
/// after that it keeps its place.
pub const MAX_OVERTAKES: u32 = 8;

/// A waiter in a pool's queue.
pub trait PriorityWaiter {
    /// The priority of the statement it waits for.
    fn priority(&self) -> Priority;
    /// Times a later, more urgent waiter was queued ahead of it.
    fn overtaken(&mut self) -> &mut u32;
}

/// Queues `w` behind every waiter of its priority or a more urgent one, ahead of less urgent
/// ones that have not been overtaken [`MAX_OVERTAKES`] times yet.
pub fn enqueue<W: PriorityWaiter>(queue: &mut VecDeque<W>, mut w: W) {
    let mut at = queue.len();
    while at > 0 {
        let before = &mut queue[at - 1];
        if before.priority() <= w.priority() || *before.overtaken() >= MAX_OVERTAKES {
            break;
        }
        at -= 1;
    }
    for jumped in queue.range_mut(at..) {
        *jumped.overtaken() += 1;
    }
    *w.overtaken() = 0;
    queue.insert(at, w);
}

#[cfg(test)]
mod tests {
    use super::*;
    use Priority::*;

    struct W(usize, Priority, u32);

    impl PriorityWaiter for W {
        fn priority(&self) -> Priority {
            self.1
        }
        fn overtaken(&mut self) -> &mut u32 {
            &mut self.2
        }
    }

    /// Waiters of `priorities` queued in that order; their queue order as indexes of that list.
    fn queued(priorities: &[Priority]) -> Vec<usize> {
        let mut q = VecDeque::new();
        for (i, p) in priorities.iter().enumerate() {
            enqueue(&mut q, W(i, *p, 0));
        }
        q.iter().map(|w| w.0).collect()
    }

    #[test]
    fn waiters_are_served_by_priority_then_arrival() {
        assert_eq!(
            queued(&[Low, Regular, Background, Critical, Regular, Low]),
            [3, 1, 4, 0, 5, 2]
        );
        assert_eq!(
            queued(&[Regular; 4]),
            [0, 1, 2, 3],
            "equals: first come, first served"
        );
    }

    #[test]
    fn a_low_priority_waiter_is_overtaken_a_bounded_number_of_times() {
        let mut order = vec![Background];
        order.extend(std::iter::repeat_n(Critical, 20));
        let q = queued(&order);
        // The first MAX_OVERTAKES critical waiters go ahead; every later one queues behind.
        let at = q.iter().position(|i| *i == 0).expect("queued");
        assert_eq!(at, MAX_OVERTAKES as usize);
        assert_eq!(&q[..at], (1..=at).collect::<Vec<_>>().as_slice());
    }
}
