// pgjdbc (Debian's libpostgresql-jdbc-java) through Sluice on a pool of one server connection:
// a client with startup settings and a plain one alternate, each checked against a direct
// connection with the same properties. Run by tests/tests/pgsql_startup.rs:
//   java -cp /usr/share/java/postgresql.jar PgJdbc.java SLUICE_PORT DIRECT_PORT
import java.sql.*;
import java.util.*;

public class PgJdbc {
    static Connection connect(int port, boolean configured) throws SQLException {
        Properties p = new Properties();
        p.setProperty("user", "app");
        p.setProperty("password", "app");
        p.setProperty("sslmode", "disable");
        if (configured) {
            p.setProperty("ApplicationName", "jdbc-alpha");
            p.setProperty("options", "-c search_path=foo,public -c statement_timeout=2345 -c TimeZone=Asia/Tokyo");
        }
        return DriverManager.getConnection("jdbc:postgresql://127.0.0.1:" + port + "/app", p);
    }

    static List<String> settings(Connection c) throws SQLException {
        List<String> out = new ArrayList<>();
        try (Statement s = c.createStatement();
             ResultSet r = s.executeQuery("SELECT current_setting('statement_timeout'), current_setting('search_path'), "
                 + "current_setting('application_name'), current_setting('TimeZone'), current_setting('DateStyle'), "
                 + "current_setting('extra_float_digits'), current_setting('client_encoding')")) {
            r.next();
            for (int i = 1; i <= 7; i++) out.add(r.getString(i));
        }
        return out;
    }

    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        int direct = Integer.parseInt(args[1]);
        Map<Boolean, List<String>> want = new HashMap<>();
        for (boolean configured : new boolean[] {true, false}) {
            try (Connection d = connect(direct, configured)) {
                want.put(configured, settings(d));
            }
        }
        check(!want.get(true).equals(want.get(false)), "profiles differ: " + want);
        try (Connection a = connect(port, true); Connection b = connect(port, false)) {
            try (Statement s = a.createStatement()) {
                s.execute("DROP TABLE IF EXISTS jdbc_e2e");
                s.execute("CREATE TABLE jdbc_e2e (id int primary key, who text)");
            }
            PreparedStatement pa = a.prepareStatement("SELECT ?::int + 1, current_setting('application_name')");
            PreparedStatement pb = b.prepareStatement("SELECT ?::int + 1, current_setting('application_name')");
            // Past prepareThreshold (5) pgjdbc switches to named server-side statements.
            for (int i = 0; i < 12; i++) {
                check(settings(a).equals(want.get(true)), "alpha round " + i + ": " + settings(a) + " vs " + want.get(true));
                check(settings(b).equals(want.get(false)), "plain round " + i + ": " + settings(b) + " vs " + want.get(false));
                for (Object[] c : new Object[][] {{pa, "jdbc-alpha"}, {pb, want.get(false).get(2)}}) {
                    PreparedStatement ps = (PreparedStatement) c[0];
                    ps.setInt(1, i);
                    try (ResultSet r = ps.executeQuery()) {
                        r.next();
                        check(r.getInt(1) == i + 1, "prepared result");
                        check(r.getString(2).equals(c[1]), "prepared app name " + r.getString(2));
                    }
                }
            }
            // A batch in a transaction that rolls back, then one that commits.
            a.setAutoCommit(false);
            PreparedStatement ins = a.prepareStatement("INSERT INTO jdbc_e2e VALUES (?, ?)");
            for (int i = 0; i < 20; i++) { ins.setInt(1, i); ins.setString(2, "a"); ins.addBatch(); }
            ins.executeBatch();
            a.rollback();
            for (int i = 0; i < 20; i++) { ins.setInt(1, i); ins.setString(2, "a"); ins.addBatch(); }
            ins.executeBatch();
            a.commit();
            a.setAutoCommit(true);
            try (Statement s = b.createStatement(); ResultSet r = s.executeQuery("SELECT count(*) FROM jdbc_e2e")) {
                r.next();
                check(r.getInt(1) == 20, "batch rows " + r.getInt(1));
            }
            // setQueryTimeout really cancels, and the connection stays usable.
            try (Statement s = b.createStatement()) {
                s.setQueryTimeout(1);
                try {
                    s.execute("SELECT pg_sleep(10)");
                    check(false, "pg_sleep was not cancelled");
                } catch (SQLException e) {
                    // 57014 is query_canceled: the server stopped the sleep early.
                    check("57014".equals(e.getSQLState()), "cancel state " + e.getSQLState());
                }
                System.out.println("cancelled by the timeout");
            }
            check(settings(b).equals(want.get(false)), "plain after cancel");
            try (Statement s = a.createStatement()) { s.execute("DROP TABLE jdbc_e2e"); }
        }
        // Several threads, each with its own connection and startup settings, share the pool of
        // one server connection: prepared statements past prepareThreshold, own settings always.
        java.util.List<Thread> workers = new java.util.ArrayList<>();
        java.util.concurrent.ConcurrentLinkedQueue<Throwable> failures = new java.util.concurrent.ConcurrentLinkedQueue<>();
        for (int t = 0; t < 4; t++) {
            final boolean configured = t % 2 == 0;
            workers.add(new Thread(() -> {
                try (Connection c = connect(port, configured);
                     PreparedStatement ps = c.prepareStatement("SELECT ?::int * 2, current_setting('application_name')")) {
                    for (int i = 0; i < 20; i++) {
                        ps.setInt(1, i);
                        try (ResultSet r = ps.executeQuery()) {
                            r.next();
                            check(r.getInt(1) == 2 * i, "threaded prepared result");
                            check(r.getString(2).equals(want.get(configured).get(2)), "threaded app name " + r.getString(2));
                        }
                    }
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
