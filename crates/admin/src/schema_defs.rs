//! Table definitions of the admin store: ProxySQL's table names, columns, defaults and CHECK
//! constraints (its documented admin interface), so operators' statements work unchanged.
//! Each configuration table also exists as `runtime_<name>` and in the `disk` schema.

/// `mysql_servers` and `pgsql_servers`: the port's default differs, and MySQL's has `gtid_port`
/// after it.
macro_rules! servers_columns {
    ($default_port:literal, $gtid_port:literal) => {
        concat!(
            "hostgroup_id INT CHECK (hostgroup_id>=0) NOT NULL DEFAULT 0,\n\
             hostname VARCHAR NOT NULL,\n\
             port INT CHECK (port >= 0 AND port <= 65535) NOT NULL DEFAULT ",
            $default_port,
            ",\n",
            $gtid_port,
            "status VARCHAR CHECK (UPPER(status) IN ('ONLINE','SHUNNED','OFFLINE_SOFT', 'OFFLINE_HARD')) NOT NULL DEFAULT 'ONLINE',\n\
             weight INT CHECK (weight >= 0 AND weight <=10000000) NOT NULL DEFAULT 1,\n\
             compression INT CHECK (compression IN(0,1)) NOT NULL DEFAULT 0,\n\
             max_connections INT CHECK (max_connections >=0) NOT NULL DEFAULT 1000,\n\
             max_replication_lag INT CHECK (max_replication_lag >= 0 AND max_replication_lag <= 126144000) NOT NULL DEFAULT 0,\n\
             use_ssl INT CHECK (use_ssl IN(0,1)) NOT NULL DEFAULT 0,\n\
             max_latency_ms INT UNSIGNED CHECK (max_latency_ms>=0) NOT NULL DEFAULT 0,\n\
             comment VARCHAR NOT NULL DEFAULT '',\n\
             PRIMARY KEY (hostgroup_id, hostname, port)"
        )
    };
}

/// `mysql_users` and `pgsql_users`: MySQL's has `default_schema` and `schema_locked` after
/// `default_hostgroup`.
macro_rules! users_columns {
    ($schema_columns:literal) => {
        concat!(
            "username VARCHAR NOT NULL,\n\
             password VARCHAR,\n\
             active INT CHECK (active IN (0,1)) NOT NULL DEFAULT 1,\n\
             use_ssl INT CHECK (use_ssl IN (0,1)) NOT NULL DEFAULT 0,\n\
             default_hostgroup INT NOT NULL DEFAULT 0,\n",
            $schema_columns,
            "transaction_persistent INT CHECK (transaction_persistent IN (0,1)) NOT NULL DEFAULT 1,\n\
             fast_forward INT CHECK (fast_forward IN (0,1)) NOT NULL DEFAULT 0,\n\
             backend INT CHECK (backend IN (0,1)) NOT NULL DEFAULT 1,\n\
             frontend INT CHECK (frontend IN (0,1)) NOT NULL DEFAULT 1,\n\
             max_connections INT CHECK (max_connections >=0) NOT NULL DEFAULT 10000,\n\
             attributes VARCHAR CHECK (JSON_VALID(attributes) OR attributes = '') NOT NULL DEFAULT '',\n\
             comment VARCHAR NOT NULL DEFAULT '',\n\
             PRIMARY KEY (username, backend),\n\
             UNIQUE (username, frontend)"
        )
    };
}

/// `mysql_query_rules` and `pgsql_query_rules`: the column naming the schema (`schemaname`,
/// `database`), and MySQL's `gtid_from_hostgroup` after `multiplex`.
macro_rules! query_rules_columns {
    ($schema:literal, $gtid_from_hostgroup:literal) => {
        concat!(
            "rule_id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL,\n\
             active INT CHECK (active IN (0,1)) NOT NULL DEFAULT 0,\n\
             username VARCHAR,\n",
            $schema,
            " VARCHAR,\n",
            "flagIN INT CHECK (flagIN >= 0) NOT NULL DEFAULT 0,\n\
             client_addr VARCHAR,\n\
             proxy_addr VARCHAR,\n\
             proxy_port INT CHECK (proxy_port >= 0 AND proxy_port <= 65535),\n\
             digest VARCHAR,\n\
             match_digest VARCHAR,\n\
             match_pattern VARCHAR,\n\
             negate_match_pattern INT CHECK (negate_match_pattern IN (0,1)) NOT NULL DEFAULT 0,\n\
             re_modifiers VARCHAR DEFAULT 'CASELESS',\n\
             flagOUT INT CHECK (flagOUT >= 0),\n\
             replace_pattern VARCHAR CHECK(CASE WHEN replace_pattern IS NULL THEN 1 WHEN replace_pattern IS NOT NULL AND match_pattern IS NOT NULL THEN 1 ELSE 0 END),\n\
             destination_hostgroup INT DEFAULT NULL,\n\
             cache_ttl INT CHECK(cache_ttl > 0),\n\
             cache_empty_result INT CHECK (cache_empty_result IN (0,1)) DEFAULT NULL,\n\
             cache_timeout INT CHECK(cache_timeout >= 0),\n\
             reconnect INT CHECK (reconnect IN (0,1)) DEFAULT NULL,\n\
             timeout INT UNSIGNED CHECK (timeout >= 0),\n\
             retries INT CHECK (retries>=0 AND retries <=1000),\n\
             delay INT UNSIGNED CHECK (delay >=0),\n\
             next_query_flagIN INT UNSIGNED,\n\
             mirror_flagOUT INT UNSIGNED,\n\
             mirror_hostgroup INT UNSIGNED,\n\
             error_msg VARCHAR,\n\
             OK_msg VARCHAR,\n\
             sticky_conn INT CHECK (sticky_conn IN (0,1)),\n\
             multiplex INT CHECK (multiplex IN (0,1,2)),\n",
            $gtid_from_hostgroup,
            "log INT CHECK (log IN (0,1)),\n\
             apply INT CHECK(apply IN (0,1)) NOT NULL DEFAULT 0,\n\
             attributes VARCHAR CHECK (JSON_VALID(attributes) OR attributes = '') NOT NULL DEFAULT '',\n\
             comment VARCHAR,\n\
             workload_class VARCHAR,\n\
             causal_reads VARCHAR CHECK (causal_reads IN ('none','local','user','global'))"
        )
    };
}

/// `mysql_query_rules_fast_routing` and `pgsql_query_rules_fast_routing`: the column naming the
/// schema (`schemaname`, `database`).
macro_rules! fast_routing_columns {
    ($schema:literal) => {
        concat!(
            "username VARCHAR NOT NULL,\n",
            $schema,
            " VARCHAR NOT NULL,\n",
            "flagIN INT NOT NULL DEFAULT 0,\n\
             destination_hostgroup INT CHECK (destination_hostgroup >= 0) NOT NULL,\n\
             comment VARCHAR NOT NULL,\n",
            "PRIMARY KEY (username, ",
            $schema,
            ", flagIN)"
        )
    };
}

/// `mysql_servers_ssl_params` and `pgsql_servers_ssl_params`: the port's default differs.
macro_rules! ssl_params_columns {
    ($default_port:literal) => {
        concat!(
            "hostname VARCHAR NOT NULL,\n\
             port INT CHECK (port >= 0 AND port <= 65535) NOT NULL DEFAULT ",
            $default_port,
            ",\n",
            "username VARCHAR NOT NULL DEFAULT '',\n\
             ssl_ca VARCHAR NOT NULL DEFAULT '',\n\
             ssl_cert VARCHAR NOT NULL DEFAULT '',\n\
             ssl_key VARCHAR NOT NULL DEFAULT '',\n\
             ssl_capath VARCHAR NOT NULL DEFAULT '',\n\
             ssl_crl VARCHAR NOT NULL DEFAULT '',\n\
             ssl_crlpath VARCHAR NOT NULL DEFAULT '',\n\
             ssl_cipher VARCHAR NOT NULL DEFAULT '',\n\
             tls_version VARCHAR NOT NULL DEFAULT '',\n\
             ssl_verify VARCHAR CHECK (ssl_verify IN ('', 'none', 'verify-ca', 'verify-full')) NOT NULL DEFAULT '',\n\
             comment VARCHAR NOT NULL DEFAULT '',\n\
             PRIMARY KEY (hostname, port, username)"
        )
    };
}

/// `mysql_replication_hostgroups` and `pgsql_replication_hostgroups`.
const REPLICATION_HOSTGROUPS_COLUMNS: &str = "writer_hostgroup INT CHECK (writer_hostgroup>=0) NOT NULL PRIMARY KEY,\n\
     reader_hostgroup INT NOT NULL CHECK (reader_hostgroup<>writer_hostgroup AND reader_hostgroup>=0),\n\
     check_type VARCHAR CHECK (LOWER(check_type) IN ('read_only','innodb_read_only','super_read_only','read_only|innodb_read_only','read_only&innodb_read_only')) NOT NULL DEFAULT 'read_only',\n\
     comment VARCHAR NOT NULL DEFAULT '',\n\
     UNIQUE (reader_hostgroup)";

/// `mysql_hostgroup_attributes` and `pgsql_hostgroup_attributes`.
const HOSTGROUP_ATTRIBUTES_COLUMNS: &str = "hostgroup_id INT NOT NULL PRIMARY KEY,\n\
     max_num_online_servers INT CHECK (max_num_online_servers>=0 AND max_num_online_servers <= 1000000) NOT NULL DEFAULT 1000000,\n\
     autocommit INT CHECK (autocommit IN (-1, 0, 1)) NOT NULL DEFAULT -1,\n\
     free_connections_pct INT CHECK (free_connections_pct >= 0 AND free_connections_pct <= 100) NOT NULL DEFAULT 10,\n\
     init_connect VARCHAR NOT NULL DEFAULT '',\n\
     multiplex INT CHECK (multiplex IN (0, 1)) NOT NULL DEFAULT 1,\n\
     connection_warming INT CHECK (connection_warming IN (0, 1)) NOT NULL DEFAULT 0,\n\
     throttle_connections_per_sec INT CHECK (throttle_connections_per_sec >= 1 AND throttle_connections_per_sec <= 1000000) NOT NULL DEFAULT 1000000,\n\
     ignore_session_variables VARCHAR CHECK (JSON_VALID(ignore_session_variables) OR ignore_session_variables = '') NOT NULL DEFAULT '',\n\
     hostgroup_settings VARCHAR CHECK (JSON_VALID(hostgroup_settings) OR hostgroup_settings = '') NOT NULL DEFAULT '',\n\
     servers_defaults VARCHAR CHECK (JSON_VALID(servers_defaults) OR servers_defaults = '') NOT NULL DEFAULT '',\n\
     comment VARCHAR NOT NULL DEFAULT ''";

/// Configuration tables: (name, column definitions).
pub(crate) const CONFIG_TABLES: &[(&str, &str)] = &[
    (
        "mysql_servers",
        servers_columns!(
            "3306",
            "gtid_port INT CHECK ((gtid_port <> port OR gtid_port=0) AND gtid_port >= 0 AND gtid_port <= 65535) NOT NULL DEFAULT 0,\n"
        ),
    ),
    (
        "mysql_users",
        users_columns!(
            "default_schema VARCHAR,\nschema_locked INT CHECK (schema_locked IN (0,1)) NOT NULL DEFAULT 0,\n"
        ),
    ),
    (
        "mysql_query_rules",
        query_rules_columns!("schemaname", "gtid_from_hostgroup INT UNSIGNED,\n"),
    ),
    (
        "mysql_query_rules_fast_routing",
        fast_routing_columns!("schemaname"),
    ),
    (
        "mysql_replication_hostgroups",
        REPLICATION_HOSTGROUPS_COLUMNS,
    ),
    (
        "mysql_galera_hostgroups",
        "writer_hostgroup INT CHECK (writer_hostgroup>=0) NOT NULL PRIMARY KEY,\n\
     backup_writer_hostgroup INT CHECK (backup_writer_hostgroup>=0 AND backup_writer_hostgroup<>writer_hostgroup) NOT NULL,\n\
     reader_hostgroup INT NOT NULL CHECK (reader_hostgroup<>writer_hostgroup AND backup_writer_hostgroup<>reader_hostgroup AND reader_hostgroup>0),\n\
     offline_hostgroup INT NOT NULL CHECK (offline_hostgroup<>writer_hostgroup AND offline_hostgroup<>reader_hostgroup AND backup_writer_hostgroup<>offline_hostgroup AND offline_hostgroup>=0),\n\
     active INT CHECK (active IN (0,1)) NOT NULL DEFAULT 1,\n\
     max_writers INT NOT NULL CHECK (max_writers >= 0) DEFAULT 1,\n\
     writer_is_also_reader INT CHECK (writer_is_also_reader IN (0,1,2)) NOT NULL DEFAULT 0,\n\
     max_transactions_behind INT CHECK (max_transactions_behind>=0) NOT NULL DEFAULT 0,\n\
     comment VARCHAR,\n\
     UNIQUE (reader_hostgroup),\n\
     UNIQUE (offline_hostgroup),\n\
     UNIQUE (backup_writer_hostgroup)",
    ),
    (
        "mysql_group_replication_hostgroups",
        "writer_hostgroup INT CHECK (writer_hostgroup>=0) NOT NULL PRIMARY KEY,\n\
     backup_writer_hostgroup INT CHECK (backup_writer_hostgroup>=0 AND backup_writer_hostgroup<>writer_hostgroup) NOT NULL,\n\
     reader_hostgroup INT NOT NULL CHECK (reader_hostgroup<>writer_hostgroup AND backup_writer_hostgroup<>reader_hostgroup AND reader_hostgroup>0),\n\
     offline_hostgroup INT NOT NULL CHECK (offline_hostgroup<>writer_hostgroup AND offline_hostgroup<>reader_hostgroup AND backup_writer_hostgroup<>offline_hostgroup AND offline_hostgroup>=0),\n\
     active INT CHECK (active IN (0,1)) NOT NULL DEFAULT 1,\n\
     max_writers INT NOT NULL CHECK (max_writers >= 0) DEFAULT 1,\n\
     writer_is_also_reader INT CHECK (writer_is_also_reader IN (0,1,2)) NOT NULL DEFAULT 0,\n\
     max_transactions_behind INT CHECK (max_transactions_behind>=0) NOT NULL DEFAULT 0,\n\
     comment VARCHAR,\n\
     UNIQUE (reader_hostgroup),\n\
     UNIQUE (offline_hostgroup),\n\
     UNIQUE (backup_writer_hostgroup)",
    ),
    ("mysql_servers_ssl_params", ssl_params_columns!("3306")),
    ("pgsql_servers_ssl_params", ssl_params_columns!("5432")),
    ("mysql_hostgroup_attributes", HOSTGROUP_ATTRIBUTES_COLUMNS),
    (
        "global_variables",
        "variable_name VARCHAR NOT NULL PRIMARY KEY,\n\
     variable_value VARCHAR NOT NULL",
    ),
    ("pgsql_servers", servers_columns!("5432", "")),
    ("pgsql_users", users_columns!("")),
    ("pgsql_query_rules", query_rules_columns!("database", "")),
    (
        "pgsql_query_rules_fast_routing",
        fast_routing_columns!("database"),
    ),
    (
        "pgsql_replication_hostgroups",
        REPLICATION_HOSTGROUPS_COLUMNS,
    ),
    ("pgsql_hostgroup_attributes", HOSTGROUP_ATTRIBUTES_COLUMNS),
    (
        "proxysql_servers",
        "hostname VARCHAR NOT NULL,\n\
     port INT NOT NULL DEFAULT 6032,\n\
     weight INT CHECK (weight >= 0) NOT NULL DEFAULT 0,\n\
     comment VARCHAR NOT NULL DEFAULT '',\n\
     PRIMARY KEY (hostname, port)",
    ),
    (
        "mcp_users",
        "username VARCHAR NOT NULL PRIMARY KEY,\n\
     token_sha256 VARCHAR NOT NULL UNIQUE,\n\
     active INT CHECK (active IN (0,1)) NOT NULL DEFAULT 1,\n\
     db_username VARCHAR NOT NULL DEFAULT '',\n\
     endpoints VARCHAR NOT NULL DEFAULT 'query',\n\
     targets VARCHAR NOT NULL DEFAULT '*',\n\
     max_rows INT CHECK (max_rows >= 0) NOT NULL DEFAULT 0,\n\
     max_bytes INT CHECK (max_bytes >= 0) NOT NULL DEFAULT 0,\n\
     timeout_ms INT CHECK (timeout_ms >= 0) NOT NULL DEFAULT 0,\n\
     calls_per_minute INT CHECK (calls_per_minute >= 0) NOT NULL DEFAULT 0,\n\
     masked_columns VARCHAR NOT NULL DEFAULT '',\n\
     comment VARCHAR NOT NULL DEFAULT ''",
    ),
    (
        "mcp_targets",
        "target_id VARCHAR NOT NULL PRIMARY KEY,\n\
     protocol VARCHAR CHECK (LOWER(protocol) IN ('mysql','pgsql')) NOT NULL,\n\
     hostgroup_id INT CHECK (hostgroup_id >= 0) NOT NULL,\n\
     username VARCHAR NOT NULL DEFAULT '',\n\
     default_schema VARCHAR NOT NULL DEFAULT '',\n\
     description VARCHAR NOT NULL DEFAULT '',\n\
     max_rows INT CHECK (max_rows >= 0) NOT NULL DEFAULT 0,\n\
     timeout_ms INT CHECK (timeout_ms >= 0) NOT NULL DEFAULT 0,\n\
     allow_explain INT CHECK (allow_explain IN (0,1)) NOT NULL DEFAULT 1,\n\
     allow_discovery INT CHECK (allow_discovery IN (0,1)) NOT NULL DEFAULT 1,\n\
     allow_writer INT CHECK (allow_writer IN (0,1)) NOT NULL DEFAULT 0,\n\
     active INT CHECK (active IN (0,1)) NOT NULL DEFAULT 1,\n\
     comment VARCHAR NOT NULL DEFAULT ''",
    ),
    (
        "mcp_query_rules",
        "rule_id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL,\n\
     active INT CHECK (active IN (0,1)) NOT NULL DEFAULT 0,\n\
     username VARCHAR,\n\
     mcp_username VARCHAR,\n\
     target_id VARCHAR,\n\
     schemaname VARCHAR,\n\
     tool_name VARCHAR,\n\
     match_pattern VARCHAR,\n\
     negate_match_pattern INT CHECK (negate_match_pattern IN (0,1)) NOT NULL DEFAULT 0,\n\
     re_modifiers VARCHAR DEFAULT 'CASELESS',\n\
     flagIN INT CHECK (flagIN >= 0) NOT NULL DEFAULT 0,\n\
     flagOUT INT CHECK (flagOUT >= 0),\n\
     replace_pattern VARCHAR,\n\
     timeout_ms INT CHECK (timeout_ms >= 0),\n\
     error_msg VARCHAR,\n\
     OK_msg VARCHAR,\n\
     log INT CHECK (log IN (0,1)),\n\
     apply INT CHECK (apply IN (0,1)) NOT NULL DEFAULT 1,\n\
     comment VARCHAR",
    ),
    (
        "rag_sources",
        "source_id INT CHECK (source_id >= 0) NOT NULL PRIMARY KEY,\n\
     name VARCHAR NOT NULL UNIQUE,\n\
     enabled INT CHECK (enabled IN (0,1)) NOT NULL DEFAULT 1,\n\
     protocol VARCHAR CHECK (LOWER(protocol) IN ('mysql','pgsql')) NOT NULL,\n\
     hostgroup_id INT CHECK (hostgroup_id >= 0) NOT NULL,\n\
     username VARCHAR NOT NULL,\n\
     schemaname VARCHAR NOT NULL DEFAULT '',\n\
     table_name VARCHAR NOT NULL DEFAULT '',\n\
     query VARCHAR NOT NULL DEFAULT '',\n\
     where_sql VARCHAR NOT NULL DEFAULT '',\n\
     pk_column VARCHAR NOT NULL,\n\
     change_column VARCHAR NOT NULL,\n\
     title_column VARCHAR NOT NULL DEFAULT '',\n\
     text_template VARCHAR NOT NULL,\n\
     metadata_columns VARCHAR NOT NULL DEFAULT '',\n\
     chunk_size INT CHECK (chunk_size >= 0) NOT NULL DEFAULT 1000,\n\
     chunk_overlap INT CHECK (chunk_overlap >= 0) NOT NULL DEFAULT 150,\n\
     chunk_min INT CHECK (chunk_min >= 0) NOT NULL DEFAULT 200,\n\
     batch_size INT CHECK (batch_size >= 0) NOT NULL DEFAULT 500,\n\
     rescan_window INT CHECK (rescan_window >= 0) NOT NULL DEFAULT 60,\n\
     sync_interval_ms INT CHECK (sync_interval_ms >= 0) NOT NULL DEFAULT 0,\n\
     sweep_interval_ms INT CHECK (sweep_interval_ms >= 0) NOT NULL DEFAULT 3600000,\n\
     workload_class VARCHAR NOT NULL DEFAULT 'ingest',\n\
     embedding_provider VARCHAR NOT NULL DEFAULT 'openai',\n\
     embedding_base_url VARCHAR NOT NULL DEFAULT '',\n\
     embedding_model VARCHAR NOT NULL DEFAULT '',\n\
     embedding_dimension INT CHECK (embedding_dimension >= 0) NOT NULL DEFAULT 384,\n\
     embedding_api_key_env VARCHAR NOT NULL DEFAULT '',\n\
     embedding_api_key_file VARCHAR NOT NULL DEFAULT '',\n\
     embedding_batch_size INT CHECK (embedding_batch_size >= 0) NOT NULL DEFAULT 32,\n\
     embedding_timeout_ms INT CHECK (embedding_timeout_ms >= 0) NOT NULL DEFAULT 20000,\n\
     embedding_max_rps INT CHECK (embedding_max_rps >= 0) NOT NULL DEFAULT 0,\n\
     embedding_passage_prefix VARCHAR NOT NULL DEFAULT '',\n\
     embedding_query_prefix VARCHAR NOT NULL DEFAULT '',\n\
     comment VARCHAR NOT NULL DEFAULT ''",
    ),
    (
        "workload_classes",
        "name VARCHAR NOT NULL PRIMARY KEY,\n\
     active INT CHECK (active IN (0,1)) NOT NULL DEFAULT 1,\n\
     priority VARCHAR CHECK (LOWER(priority) IN ('critical','regular','low','background')) NOT NULL DEFAULT 'regular',\n\
     max_concurrency INT NOT NULL DEFAULT 0,\n\
     max_queue INT NOT NULL DEFAULT 100,\n\
     queue_timeout_ms INT NOT NULL DEFAULT 1000,\n\
     max_execution_ms INT NOT NULL DEFAULT 0,\n\
     max_qps INT,\n\
     mysql_errno INT,\n\
     comment VARCHAR NOT NULL DEFAULT ''",
    ),
    (
        "workload_guards",
        "guard_id INT CHECK (guard_id >= 0) NOT NULL PRIMARY KEY,\n\
     active INT CHECK (active IN (0,1)) NOT NULL DEFAULT 1,\n\
     classes VARCHAR NOT NULL,\n\
     signal VARCHAR CHECK (LOWER(signal) IN ('replica_lag','class_p99','threads_running','replica_backlog','heartbeat_lag','operator')) NOT NULL,\n\
     protocol VARCHAR CHECK (LOWER(protocol) IN ('mysql','pgsql')) NOT NULL DEFAULT 'mysql',\n\
     hostgroup INT,\n\
     watch_class VARCHAR NOT NULL DEFAULT '',\n\
     window_s INT NOT NULL DEFAULT 10,\n\
     low REAL NOT NULL,\n\
     high REAL NOT NULL,\n\
     reject_above REAL,\n\
     reject_span REAL NOT NULL DEFAULT 0,\n\
     max_delay_ms INT NOT NULL DEFAULT 0,\n\
     mode VARCHAR CHECK (LOWER(mode) IN ('shed','reduce','reroute')) NOT NULL DEFAULT 'shed',\n\
     fallback_hostgroup INT,\n\
     hysteresis_pct INT NOT NULL DEFAULT 20,\n\
     min_open_ms INT NOT NULL DEFAULT 1000,\n\
     release_ms INT CHECK (release_ms >= 0) NOT NULL DEFAULT 0,\n\
     unknown_grace_ms INT NOT NULL DEFAULT 5000,\n\
     apps VARCHAR NOT NULL DEFAULT '*',\n\
     comment VARCHAR NOT NULL DEFAULT ''",
    ),
    (
        "scheduler",
        "id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL,\n\
     active INT CHECK (active IN (0,1)) NOT NULL DEFAULT 1,\n\
     interval_ms INTEGER CHECK (interval_ms>=100 AND interval_ms<=100000000) NOT NULL,\n\
     filename VARCHAR NOT NULL,\n\
     arg1 VARCHAR,\n\
     arg2 VARCHAR,\n\
     arg3 VARCHAR,\n\
     arg4 VARCHAR,\n\
     arg5 VARCHAR,\n\
     comment VARCHAR NOT NULL DEFAULT ''",
    ),
];
