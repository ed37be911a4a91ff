-- Accounts created on the primary (replicated to the replica).
CREATE USER IF NOT EXISTS 'app'@'%' IDENTIFIED BY 'app';
GRANT ALL ON *.* TO 'app'@'%';
REVOKE READ_ONLY ADMIN ON *.* FROM 'app'@'%';
CREATE USER IF NOT EXISTS 'monitor'@'%' IDENTIFIED BY 'monitor';
GRANT REPLICATION CLIENT, SLAVE MONITOR, PROCESS ON *.* TO 'monitor'@'%';
CREATE DATABASE IF NOT EXISTS app;
