// pgjdbc against Rill's pgwire: PreparedStatement parameters set with setLong
// and setDouble (pgjdbc sends them typed, and in binary once the statement is
// server-prepared), and the parameter types the server describes. Prints one
// line per check; tests/python/test_pgwire_asyncpg.py compares them.
// Usage: java -cp postgresql.jar:. PgwireJdbcParams <port> <token>
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ParameterMetaData;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.util.Properties;

public class PgwireJdbcParams {
  public static void main(String[] args) throws Exception {
    Properties props = new Properties();
    props.setProperty("user", "jdbc");
    props.setProperty("password", args[1]);
    props.setProperty("prepareThreshold", "1");  // server-prepared from the first run
    String url = "jdbc:postgresql://127.0.0.1:" + args[0] + "/rill";
    try (Connection conn = DriverManager.getConnection(url, props)) {
      try (PreparedStatement ps = conn.prepareStatement(
          "SELECT order_id FROM orders WHERE order_id > ? AND amount < ? ORDER BY order_id")) {
        StringBuilder line = new StringBuilder("rows");
        for (int round = 0; round < 3; ++round) {
          ps.setLong(1, 90L);
          ps.setDouble(2, 120.0);
          try (ResultSet rs = ps.executeQuery()) {
            if (round == 2) {
              while (rs.next()) {
                line.append(" ").append(rs.getLong(1));
              }
            }
          }
        }
        System.out.println(line);
        ParameterMetaData meta = ps.getParameterMetaData();
        System.out.println("params " + meta.getParameterTypeName(1) + " "
            + meta.getParameterTypeName(2));
      }
      try (PreparedStatement ps = conn.prepareStatement("SELECT ?::bigint + 1")) {
        ps.setLong(1, 41L);
        try (ResultSet rs = ps.executeQuery()) {
          rs.next();
          System.out.println("cast " + rs.getLong(1));
        }
      }
    }
  }
}
