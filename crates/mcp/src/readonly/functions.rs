//! Functions with side effects, per dialect: a call of any of them is refused however the
//! statement around it looks. A trailing `*` matches a prefix. These are the functions a READ
//! ONLY transaction does not stop (locks, files, other sessions, sequences, other servers,
//! server state), measured on this project's test servers and listed in docs/mcp.md.

/// MySQL / MariaDB.
pub const MYSQL_SIDE_EFFECTS: &[&str] = &[
    // User-level locks outlive the statement and block other sessions.
    "get_lock",
    "release_lock",
    "release_all_locks",
    "is_free_lock",
    "is_used_lock",
    // Files on the server.
    "load_file",
    // Replication and server state.
    "master_pos_wait",
    "source_pos_wait",
    "master_gtid_wait",
    "wait_for_executed_gtid_set",
    "wait_until_sql_thread_after_gtids",
    // CPU burners that hold a connection without a timeout of their own.
    "benchmark",
    // Sequences (MariaDB): advancing one is a write.
    "nextval",
    "setval",
    "lastval",
    // Session state that crosses into the next call.
    "last_insert_id",
    "name_const",
    // Plugins and UDFs known to run commands or write.
    "sys_exec",
    "sys_eval",
    "lib_mysqludf_*",
];

/// PostgreSQL.
pub const PGSQL_SIDE_EFFECTS: &[&str] = &[
    // Advisory locks outlive the statement.
    "pg_advisory_*",
    "pg_try_advisory_*",
    // Files and programs on the server.
    "pg_read_file",
    "pg_read_binary_file",
    "pg_ls_*",
    "pg_stat_file",
    "pg_file_write",
    "pg_file_rename",
    "pg_file_unlink",
    "pg_logdir_ls",
    "lo_*",
    // Other sessions and the server itself.
    "pg_terminate_backend",
    "pg_cancel_backend",
    "pg_reload_conf",
    "pg_rotate_logfile",
    "pg_log_backend_memory_contexts",
    "pg_promote",
    "pg_switch_wal",
    "pg_create_restore_point",
    "pg_backup_start",
    "pg_backup_stop",
    "pg_start_backup",
    "pg_stop_backup",
    "pg_wal_replay_pause",
    "pg_wal_replay_resume",
    "pg_create_physical_replication_slot",
    "pg_create_logical_replication_slot",
    "pg_drop_replication_slot",
    "pg_replication_slot_advance",
    "pg_logical_slot_get_changes",
    "pg_logical_emit_message",
    "pg_import_system_collations",
    "pg_stat_reset*",
    "pg_notify",
    // Session settings (set_config persists past the statement unless is_local).
    "set_config",
    // Sequences: advancing one is a write even in a READ ONLY transaction.
    "nextval",
    "setval",
    // Transaction ids: assigning one is a write.
    "txid_current",
    "pg_current_xact_id",
    // Other servers.
    "dblink*",
    "postgres_fdw_*",
    // Queries inside strings.
    "query_to_xml",
    "query_to_xml_and_xmlschema",
    "cursor_to_xml",
    "table_to_xml",
    "database_to_xml*",
    "schema_to_xml*",
];
