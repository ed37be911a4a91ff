//! COM_STMT_EXECUTE rewriting, kept free of sessions and sockets so it can be unit-tested and
//! fuzzed: the client's statement id becomes the backend connection's, and parameter types the
//! client bound on an earlier execute are added when the backend connection has not seen them.

use bytes::Bytes;

/// The statement id of a COM_STMT_EXECUTE / SEND_LONG_DATA / RESET / CLOSE / FETCH payload.
pub(crate) fn stmt_id(payload: &[u8]) -> Option<u32> {
    let b = payload.get(1..5)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Where the parameter-type block of a COM_STMT_EXECUTE starts, and whether it is present.
fn types_offset(payload: &[u8], num_params: u16) -> Option<(usize, bool)> {
    if num_params == 0 {
        return None;
    }
    let flag_at = 10 + usize::from(num_params).div_ceil(8);
    let bound = *payload.get(flag_at)? == 1;
    Some((flag_at, bound))
}

/// What to send for one execute and what to remember afterwards. The payload itself is not
/// copied here: [`ExecuteRewrite::write`] writes it, renumbered, where the caller frames it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ExecuteRewrite {
    /// The backend connection's id for the statement.
    backend_id: u32,
    /// Types the client bound on an earlier execute, to add at the new-params-bound flag's
    /// offset because the backend connection has not seen them.
    add_types: Option<(usize, Bytes)>,
    /// Types the client bound in this execute (to remember for its later executes).
    pub client_bound: Option<Bytes>,
    /// Types the backend connection knows after this execute, when that changed.
    pub server_knows: Option<Bytes>,
}

impl ExecuteRewrite {
    /// Plans the rewrite of `payload` (a COM_STMT_EXECUTE of a statement with `num_params`
    /// parameters) for the backend statement `backend_id`. `remembered` are the types the client
    /// bound last, `server_known` the ones the backend connection saw last, `on_server` whether
    /// the backend connection holds the statement at all. Never panics, whatever the payload.
    pub(crate) fn plan(
        payload: &Bytes,
        backend_id: u32,
        num_params: u16,
        remembered: Option<&Bytes>,
        server_known: Option<&Bytes>,
        on_server: bool,
    ) -> ExecuteRewrite {
        let mut plan = ExecuteRewrite {
            backend_id,
            add_types: None,
            client_bound: None,
            server_knows: None,
        };
        let Some((flag_at, bound)) = types_offset(payload, num_params) else {
            return plan;
        };
        if bound {
            let types_len = 2 * usize::from(num_params);
            let end = (flag_at + 1 + types_len).min(payload.len());
            let types = payload.slice((flag_at + 1).min(end)..end);
            if on_server {
                plan.server_knows = Some(types.clone());
            }
            plan.client_bound = Some(types);
            return plan;
        }
        let Some(types) = remembered else {
            return plan;
        };
        if !on_server || server_known == Some(types) {
            return plan;
        }
        // flag_at < payload.len(): types_offset found the flag byte there.
        plan.add_types = Some((flag_at, types.clone()));
        plan.server_knows = Some(types.clone());
        plan
    }

    /// Length of the rewritten `payload`.
    pub(crate) fn len(&self, payload: &[u8]) -> usize {
        payload.len() + self.add_types.as_ref().map_or(0, |(_, t)| t.len())
    }

    /// Appends the rewritten `payload` (the one [`ExecuteRewrite::plan`] was given) to `out`:
    /// the backend's statement id, and the added types with the flag that says they are bound.
    pub(crate) fn write(&self, payload: &[u8], out: &mut Vec<u8>) {
        let start = out.len();
        match &self.add_types {
            Some((flag_at, types)) if *flag_at < payload.len() => {
                out.extend_from_slice(&payload[..*flag_at]);
                out.push(1);
                out.extend_from_slice(types);
                out.extend_from_slice(&payload[flag_at + 1..]);
            }
            _ => out.extend_from_slice(payload),
        }
        if let Some(id) = out.get_mut(start + 1..start + 5) {
            id.copy_from_slice(&self.backend_id.to_le_bytes());
        }
    }

    /// The rewritten `payload` in a buffer of its own (tests and fuzzing).
    pub(crate) fn payload(&self, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len(payload));
        self.write(payload, &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An execute of statement `id` with one parameter: flags, iteration count, null bitmap,
    /// new-params-bound flag, [types], value.
    fn execute(id: u32, types: Option<[u8; 2]>) -> Bytes {
        let mut p = vec![0x17];
        p.extend_from_slice(&id.to_le_bytes());
        p.extend_from_slice(&[0, 1, 0, 0, 0, 0]);
        match types {
            Some(t) => {
                p.push(1);
                p.extend_from_slice(&t);
            }
            None => p.push(0),
        }
        p.extend_from_slice(&[7, 0, 0, 0]);
        Bytes::from(p)
    }

    #[test]
    fn renumbers_and_remembers_bound_types() {
        let input = execute(1, Some([3, 0]));
        let plan = ExecuteRewrite::plan(&input, 9, 1, None, None, true);
        assert_eq!(stmt_id(&plan.payload(&input)), Some(9));
        assert_eq!(plan.client_bound.as_deref(), Some(&[3u8, 0][..]));
        assert_eq!(plan.server_knows.as_deref(), Some(&[3u8, 0][..]));
        assert_eq!(plan.payload(&input).len(), input.len());
    }

    #[test]
    fn adds_types_a_new_backend_connection_has_not_seen() {
        let types = Bytes::from_static(&[3, 0]);
        let input = execute(1, None);
        let plan = ExecuteRewrite::plan(&input, 4, 1, Some(&types), None, true);
        assert_eq!(plan.payload(&input), execute(4, Some([3, 0])).to_vec());
        assert_eq!(plan.len(&input), plan.payload(&input).len());
        assert_eq!(plan.server_knows, Some(types.clone()));
        let same = ExecuteRewrite::plan(&input, 4, 1, Some(&types), Some(&types), true);
        assert_eq!(same.payload(&input), execute(4, None).to_vec());
    }

    #[test]
    fn truncated_payloads_are_passed_on_not_panicked_on() {
        for len in 0..16 {
            let p = execute(1, Some([3, 0])).slice(..len);
            let plan = ExecuteRewrite::plan(&p, 2, 1, None, None, true);
            assert_eq!(plan.payload(&p).len(), len);
        }
    }
}
