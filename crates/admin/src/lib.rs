//! sluice-admin: the admin store behind ports 6032 (MySQL protocol) and 6132 (PostgreSQL).
//!
//! SQLite (through sqlx) holds ProxySQL's tables in the schemas `main` (memory), `disk` (a file
//! in the datadir), `stats` and `monitor`. [`Admin`] runs admin statements: plain SQL on those
//! tables, `SET mysql-x = y`, `SHOW ...`, and the `LOAD`/`SAVE` commands that move configuration
//! between the config file, memory, disk and the runtime the data path reads.

mod command;
mod engine;
mod export;
mod functions;
mod guard;
mod layers;
mod schema;
mod schema_defs;
mod stats;
mod store;

pub use command::{Command, Direction, Module, parse_command};
pub use engine::{Admin, AdminOptions, StartupSource};
pub use export::config_to_toml;
