// pgjdbc against Rill's pgwire: connect, list tables through DatabaseMetaData,
// run a prepared statement with parameters. Prints one line per check; the
// Python test (tests/python/test_pgwire.py) compares them with the oracle.
// Usage: java -cp postgresql.jar:. PgwireJdbc <port> <token>
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

public class PgwireJdbc {
  public static void main(String[] args) throws Exception {
    Properties props = new Properties();
    props.setProperty("user", "jdbc");
    props.setProperty("password", args[1]);
    String url = "jdbc:postgresql://127.0.0.1:" + args[0] + "/rill";
    try (Connection conn = DriverManager.getConnection(url, props)) {
      DatabaseMetaData meta = conn.getMetaData();
      System.out.println("product " + meta.getDatabaseProductName() + " "
          + meta.getDatabaseMajorVersion());
      List<String> tables = new ArrayList<>();
      try (ResultSet rs = meta.getTables(null, null, "%", new String[] {"TABLE"})) {
        while (rs.next()) {
          tables.add(rs.getString("TABLE_SCHEM") + "." + rs.getString("TABLE_NAME"));
        }
      }
      System.out.println("tables " + String.join(",", tables));
      try (PreparedStatement ps = conn.prepareStatement(
          "SELECT order_id, customer, amount FROM orders WHERE order_id BETWEEN ? AND ?"
          + " AND customer = ?"
          + " ORDER BY order_id")) {
        ps.setLong(1, 10);
        ps.setInt(2, 99);
        ps.setString(3, "customer_3");
        // Several executions: pgjdbc switches to a named server-side statement.
        for (int round = 0; round < 6; ++round) {
          StringBuilder line = new StringBuilder("rows");
          try (ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
              line.append(" ").append(rs.getLong(1)).append(":").append(rs.getString(2))
                  .append(":").append(rs.getDouble(3));
            }
          }
          if (round == 5) {
            System.out.println(line);
          }
        }
      }
    }
  }
}
