#!/bin/bash
# Accounts on the PostgreSQL primary: the application, the monitor, and replication for the
# replica's pg_basebackup.
set -e
psql -v ON_ERROR_STOP=1 -U postgres <<'SQL'
CREATE ROLE app LOGIN PASSWORD 'app';
CREATE DATABASE app OWNER app;
CREATE ROLE monitor LOGIN PASSWORD 'monitor' IN ROLE pg_monitor;
CREATE ROLE repl LOGIN REPLICATION PASSWORD 'repl';
SQL
echo "host replication repl all scram-sha-256" >> "$PGDATA/pg_hba.conf"
