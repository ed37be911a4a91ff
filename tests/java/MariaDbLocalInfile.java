// MariaDB Connector/J (Debian's libmariadb-java) loads a local file through Sluice with
// allowLocalInfile=true. Run by tests/tests/mysql_local_infile.rs:
//   java -cp /usr/share/java/mariadb-java-client.jar MariaDbLocalInfile.java PORT FILE
import java.sql.*;

public class MariaDbLocalInfile {
    public static void main(String[] args) throws Exception {
        String url = "jdbc:mariadb://127.0.0.1:" + args[0] + "/?user=app&password=app&allowLocalInfile=true";
        try (Connection c = DriverManager.getConnection(url); Statement s = c.createStatement()) {
            int n = s.executeUpdate("LOAD DATA LOCAL INFILE '" + args[1]
                + "' INTO TABLE infile_e2e.jdbc FIELDS TERMINATED BY ','");
            System.out.println("loaded " + n);
        }
    }
}
