//! Just enough MySQL SQL understanding for multiplexing: a tokenizer ([`lexer`]), the `SET`
//! statement parser ([`set`]) and a per-statement classifier ([`classify`]) that finds what pins a
//! session to its backend connection. Nothing here allocates per token; every function accepts
//! any input without panicking.

pub(crate) mod classify;
pub(crate) mod compound;
pub(crate) mod lexer;
pub(crate) mod set;
