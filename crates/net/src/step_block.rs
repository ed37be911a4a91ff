//! The heap block a client session runs its commands in, shared by both protocols' sessions.
//!
//! A command's handling state (the futures of forwarding, checkout, relaying) is much larger
//! than what an idle session needs, so it must not live in the session's task: 10,000 idle
//! clients would each carry it. Boxing each command keeps the task small but allocates once per
//! statement. A [`StepBlock`] keeps one block for a busy session, reused in place for every
//! command (the session hands itself into the step and gets itself back, so every step has the
//! same type and layout), and gives it back when the session goes idle.

use std::future::Future;
use tokio_util::sync::ReusableBoxFuture;

/// One session's reusable block for its steps, each producing a `T` (typically the session
/// handed back and the step's outcome).
pub struct StepBlock<'a, T> {
    block: Option<ReusableBoxFuture<'a, T>>,
}

impl<T> Default for StepBlock<'_, T> {
    fn default() -> Self {
        StepBlock { block: None }
    }
}

impl<'a, T> StepBlock<'a, T> {
    /// Moves `step` into the block and returns it to be awaited: no allocation once a step of
    /// the same type ran here before and the block was not released since. Not an `async fn`
    /// on purpose: that would hold `step` inline in the caller's future until it is moved,
    /// which is the very size the block keeps out of the session's task.
    pub fn run<F>(&mut self, step: F) -> &mut ReusableBoxFuture<'a, T>
    where
        F: Future<Output = T> + Send + 'a,
    {
        let block = match self.block.take() {
            Some(mut block) => {
                block.set(step);
                block
            }
            None => ReusableBoxFuture::new(step),
        };
        self.block.insert(block)
    }

    /// Gives the block back (a session going idle keeps no command state).
    pub fn release(&mut self) {
        self.block = None;
    }

    /// Whether a block is held.
    pub fn is_held(&self) -> bool {
        self.block.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn step(n: u64, buf: [u8; 256]) -> u64 {
        tokio::task::yield_now().await;
        n + u64::from(buf[0])
    }

    #[tokio::test]
    async fn steps_run_in_one_block_until_released() {
        let mut b = StepBlock::default();
        assert!(!b.is_held());
        assert_eq!(b.run(step(1, [2; 256])).await, 3);
        assert!(b.is_held());
        assert_eq!(b.run(step(10, [5; 256])).await, 15);
        b.release();
        assert!(!b.is_held());
        assert_eq!(b.run(step(0, [7; 256])).await, 7);
    }
}
