//! The binary's own error: why its config file could not be read. Everything after that is
//! [`sluice_app::Error`]; `main` prints either once and picks the exit code.

/// Why the config file given on the command line cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigFileError {
    /// The file is unreadable or invalid (the error names the file).
    #[error(transparent)]
    Config(#[from] sluice_core::Error),
    /// The translation of a proxysql.cnf or pgbouncer.ini is invalid.
    #[error("{path}: {source}")]
    TranslatedConfig {
        path: String,
        #[source]
        source: sluice_core::Error,
    },
    /// A proxysql.cnf or pgbouncer.ini could not be translated.
    #[error("{path}: {source}")]
    Import {
        path: String,
        #[source]
        source: sluice_import::ImportError,
    },
    /// A pgbouncer.ini whose auth file cannot be read: Sluice would refuse every client.
    #[error("{path}: {note} (started this way, Sluice would refuse every client)")]
    UsersMissing {
        path: String,
        note: sluice_import::Note,
    },
}
