// MariaDB Connector/J (Debian's libmariadb-java) with useCompression=true through Sluice: a
// 10 MiB result and a prepared statement, compressed on the client leg. Run by
// tests/tests/mysql_compression.rs:  java -cp /usr/share/java/mariadb-java-client.jar MariaDbCompression.java PORT
import java.sql.*;

public class MariaDbCompression {
    public static void main(String[] args) throws Exception {
        String url = "jdbc:mariadb://127.0.0.1:" + args[0] + "/?user=app&password=app&useCompression=true";
        try (Connection c = DriverManager.getConnection(url); Statement s = c.createStatement()) {
            try (ResultSet r = s.executeQuery("SELECT REPEAT('r', 1024) FROM mysql.seq_1_to_10240")) {
                long rows = 0, bytes = 0;
                while (r.next()) {
                    rows++;
                    bytes += r.getString(1).length();
                }
                System.out.println("rows " + rows + " bytes " + bytes);
            }
            try (PreparedStatement ps = c.prepareStatement("SELECT ? * 2")) {
                ps.setInt(1, 21);
                try (ResultSet r = ps.executeQuery()) {
                    r.next();
                    if (r.getInt(1) != 42) throw new AssertionError("prepared result");
                }
            }
        }
        System.out.println("ok");
    }
}
