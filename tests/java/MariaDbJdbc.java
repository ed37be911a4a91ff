// MariaDB Connector/J (Debian's libmariadb-java) through Sluice: server-side prepared statements,
// batches, rollback, and query timeouts and Statement.cancel(), which Connector/J implements with
// `KILL QUERY <thread id from the handshake>` on a second connection. Run by
// tests/tests/mysql_kill.rs:  java -cp /usr/share/java/mariadb-java-client.jar MariaDbJdbc.java PORT
import java.sql.*;

public class MariaDbJdbc {
    /// Runs a SLEEP that something interrupts: true when it ended early, which MariaDB shows
    /// as SLEEP() returning 1 (0 means it slept its full time) or as error 1317 / 70100.
    static boolean interrupted(Statement s, String sleep) throws SQLException {
        try (ResultSet r = s.executeQuery(sleep)) {
            r.next();
            return r.getInt(1) == 1;
        } catch (SQLException e) {
            return e.getErrorCode() == 1317 || "70100".equals(e.getSQLState())
                || e instanceof java.sql.SQLTimeoutException;
        }
    }

    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:mariadb://127.0.0.1:" + args[0] + "/?user=app&password=app&useServerPrepStmts=true";
        try (Connection c = DriverManager.getConnection(url)) {
            try (Statement s = c.createStatement()) {
                s.execute("CREATE DATABASE IF NOT EXISTS jdbc_e2e");
                s.execute("DROP TABLE IF EXISTS jdbc_e2e.t");
                s.execute("CREATE TABLE jdbc_e2e.t (id int primary key, v varchar(20))");
            }
            long threadId;
            try (Statement s = c.createStatement(); ResultSet r = s.executeQuery("SELECT CONNECTION_ID()")) {
                r.next();
                threadId = r.getLong(1);
            }
            PreparedStatement ps = c.prepareStatement("SELECT ? + 1");
            for (int i = 0; i < 10; i++) {
                ps.setInt(1, i);
                try (ResultSet r = ps.executeQuery()) {
                    r.next();
                    check(r.getInt(1) == i + 1, "prepared result");
                }
            }
            c.setAutoCommit(false);
            PreparedStatement ins = c.prepareStatement("INSERT INTO jdbc_e2e.t VALUES (?, ?)");
            for (int i = 0; i < 20; i++) { ins.setInt(1, i); ins.setString(2, "x"); ins.addBatch(); }
            ins.executeBatch();
            c.rollback();
            for (int i = 0; i < 5; i++) { ins.setInt(1, i); ins.setString(2, "y"); ins.addBatch(); }
            ins.executeBatch();
            c.commit();
            c.setAutoCommit(true);
            try (Statement s = c.createStatement(); ResultSet r = s.executeQuery("SELECT count(*) FROM jdbc_e2e.t")) {
                r.next();
                check(r.getInt(1) == 5, "rows after rollback and commit: " + r.getInt(1));
            }
            // setQueryTimeout: Connector/J sends KILL QUERY with the handshake's thread id.
            try (Statement s = c.createStatement()) {
                s.setQueryTimeout(1);
                check(interrupted(s, "SELECT SLEEP(10)"), "the query timeout did not end SLEEP(10)");
                System.out.println("timeout ended the sleep");
            }
            // Statement.cancel() from another thread.
            try (Statement s = c.createStatement()) {
                Thread canceller = new Thread(() -> {
                    try { Thread.sleep(500); s.cancel(); } catch (Exception e) { throw new RuntimeException(e); }
                });
                canceller.start();
                boolean ended = interrupted(s, "SELECT SLEEP(10)");
                canceller.join();
                check(ended, "cancel did not end SLEEP(10)");
                System.out.println("cancel ended the sleep");
            }
            try (Statement s = c.createStatement(); ResultSet r = s.executeQuery("SELECT CONNECTION_ID()")) {
                r.next();
                check(r.getLong(1) == threadId, "same session after the kills");
            }
            try (Statement s = c.createStatement()) { s.execute("DROP DATABASE jdbc_e2e"); }
        }
        // Several threads with server-side prepared statements and transactions share a pool of
        // two backend connections.
        java.util.List<Thread> workers = new java.util.ArrayList<>();
        java.util.concurrent.ConcurrentLinkedQueue<Throwable> failures = new java.util.concurrent.ConcurrentLinkedQueue<>();
        for (int t = 0; t < 4; t++) {
            final int id = t;
            workers.add(new Thread(() -> {
                try (Connection c = DriverManager.getConnection(url);
                     PreparedStatement ps = c.prepareStatement("SELECT ? * 3")) {
                    for (int i = 0; i < 20; i++) {
                        ps.setInt(1, id * 100 + i);
                        try (ResultSet r = ps.executeQuery()) {
                            r.next();
                            check(r.getInt(1) == 3 * (id * 100 + i), "threaded prepared result");
                        }
                    }
                    c.setAutoCommit(false);
                    try (Statement s = c.createStatement()) {
                        s.execute("SELECT 1");
                    }
                    c.rollback();
                } catch (Throwable e) {
                    failures.add(e);
                }
            }));
        }
        for (Thread w : workers) w.start();
        for (Thread w : workers) w.join(60_000);
        check(failures.isEmpty(), "threads failed: " + failures);
        System.out.println("ok");
    }
}
