//! The heap block a client session runs its commands in, shared by both protocols' sessions.
//!
//! A command's handling state (the futures of forwarding, checkout, relaying) is much larger
//! than what an idle session needs, so it must not live in the session's task: 10,000 idle
//! clients would each carry it. Boxing each command keeps the task small but allocates once per
//! statement. A [`StepBlock`] keeps one block for a busy session, reused in place for every
//! command (the session hands itself into the step and gets itself back, so every step has the
//! same type), and gives it back when the session goes idle.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// One session's reusable block for its steps: every step is the same future type `F`
/// (typically a session handed in and handed back with the step's outcome), so the block holds
/// that type itself — no type erasure, no vtable call per poll — and a new step is written into
/// it in place.
pub struct StepBlock<F> {
    block: Option<Pin<Box<Option<F>>>>,
}

impl<F> Default for StepBlock<F> {
    fn default() -> Self {
        StepBlock { block: None }
    }
}

impl<F: Future> StepBlock<F> {
    /// Puts `step` in the block and returns it to be awaited: no allocation once the block is
    /// held (it is kept from step to step until [`StepBlock::release`]). Not an `async fn` on
    /// purpose: that would hold `step` inline in the caller's future until it is moved, which
    /// is the very size the block keeps out of the session's task.
    #[inline(always)]
    pub fn run(&mut self, step: F) -> StepRun<'_, F> {
        let slot = match &mut self.block {
            Some(block) => {
                block.as_mut().set(Some(step));
                block.as_mut()
            }
            none => none.insert(Box::pin(Some(step))).as_mut(),
        };
        StepRun { slot }
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

/// The step running in a [`StepBlock`]; its output is the step's. The finished step is dropped
/// as it completes, so nothing it held outlives it.
pub struct StepRun<'b, F> {
    slot: Pin<&'b mut Option<F>>,
}

impl<F: Future> Future for StepRun<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let slot = &mut self.get_mut().slot;
        // `None` only after this step completed: a finished future is not polled again.
        let Some(step) = slot.as_mut().as_pin_mut() else {
            return Poll::Pending;
        };
        let out = std::task::ready!(step.poll(cx));
        slot.set(None);
        Poll::Ready(out)
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
