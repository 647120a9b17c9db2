#include "rill/pipeline/ddl.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace rill::pipeline {

namespace {

struct Token {
  enum class Kind { kWord, kQuotedName, kString, kNumber, kSymbol, kEnd };
  Kind kind = Kind::kEnd;
  std::string text;   ///< kWord: upper-cased; kQuotedName/kString: unescaped
  std::string raw;    ///< as written (kWord: the original case)
  size_t begin = 0;   ///< byte offset in the statement
  size_t end = 0;
};

bool IsIdentStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}
bool IsIdentChar(char c) {
  return IsIdentStart(c) || std::isdigit(static_cast<unsigned char>(c)) || c == '$';
}

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}
std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Status SyntaxError(const std::string& message) { return DeclError(kSqlStateSyntax, message); }

/// Skip blanks, -- comments and /* */ comments from `i`.
size_t SkipBlanks(std::string_view s, size_t i) {
  while (i < s.size()) {
    if (std::isspace(static_cast<unsigned char>(s[i]))) {
      ++i;
    } else if (s.compare(i, 2, "--") == 0) {
      while (i < s.size() && s[i] != '\n') ++i;
    } else if (s.compare(i, 2, "/*") == 0) {
      const size_t close = s.find("*/", i + 2);
      i = close == std::string_view::npos ? s.size() : close + 2;
    } else {
      break;
    }
  }
  return i;
}

Result<std::vector<Token>> Tokenize(std::string_view s) {
  std::vector<Token> out;
  size_t i = 0;
  while (true) {
    i = SkipBlanks(s, i);
    Token t;
    t.begin = i;
    if (i >= s.size()) {
      t.kind = Token::Kind::kEnd;
      t.end = i;
      out.push_back(std::move(t));
      return out;
    }
    const char c = s[i];
    if (IsIdentStart(c)) {
      size_t j = i;
      while (j < s.size() && IsIdentChar(s[j])) ++j;
      t.kind = Token::Kind::kWord;
      t.raw = std::string(s.substr(i, j - i));
      t.text = Upper(t.raw);
      i = j;
    } else if (c == '"' || c == '\'') {
      const char quote = c;
      std::string value;
      size_t j = i + 1;
      bool closed = false;
      while (j < s.size()) {
        if (s[j] == quote) {
          if (j + 1 < s.size() && s[j + 1] == quote) {
            value += quote;
            j += 2;
            continue;
          }
          closed = true;
          ++j;
          break;
        }
        value += s[j++];
      }
      if (!closed) {
        return SyntaxError(quote == '"' ? "unterminated quoted name"
                                        : "unterminated quoted string");
      }
      if (quote == '"' && value.empty()) return SyntaxError("zero-length delimited name");
      t.kind = quote == '"' ? Token::Kind::kQuotedName : Token::Kind::kString;
      t.text = std::move(value);
      t.raw = std::string(s.substr(i, j - i));
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               ((c == '-' || c == '+' || c == '.') && i + 1 < s.size() &&
                (std::isdigit(static_cast<unsigned char>(s[i + 1])) || s[i + 1] == '.'))) {
      size_t j = i;
      if (s[j] == '-' || s[j] == '+') ++j;
      bool digits = false;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '.')) {
        digits = digits || std::isdigit(static_cast<unsigned char>(s[j]));
        ++j;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '-' || s[k] == '+')) ++k;
        if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
          j = k;
          while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        }
      }
      if (!digits) return SyntaxError("syntax error at or near \"" + std::string(1, c) + "\"");
      t.kind = Token::Kind::kNumber;
      t.raw = t.text = std::string(s.substr(i, j - i));
      i = j;
    } else {
      t.kind = Token::Kind::kSymbol;
      // Two-character operators first (they may appear in a query's text,
      // which is taken raw; here only to tokenize the rest correctly).
      static const char* kTwo[] = {">=", "<=", "<>", "!=", "::", "||"};
      size_t n = 1;
      for (const char* two : kTwo) {
        if (s.compare(i, 2, two) == 0) n = 2;
      }
      t.raw = t.text = std::string(s.substr(i, n));
      i += n;
    }
    t.end = i;
    out.push_back(std::move(t));
  }
}

class Parser {
 public:
  Parser(std::string_view sql, std::vector<Token> tokens)
      : sql_(sql), tokens_(std::move(tokens)) {}

  Result<DdlStatement> Statement() {
    DdlStatement st;
    if (Accept("CREATE")) {
      st.verb = DdlStatement::Verb::kCreate;
      RILL_ASSIGN_OR_RAISE(st.object, Object());
      if (Accept("IF")) {
        RILL_RETURN_NOT_OK(Expect("NOT"));
        RILL_RETURN_NOT_OK(Expect("EXISTS"));
        st.if_not_exists = true;
      }
      RILL_ASSIGN_OR_RAISE(st.name, Name("a name"));
      RILL_RETURN_NOT_OK(CreateBody(&st));
    } else if (Accept("DROP")) {
      st.verb = DdlStatement::Verb::kDrop;
      RILL_ASSIGN_OR_RAISE(st.object, Object());
      if (Accept("IF")) {
        RILL_RETURN_NOT_OK(Expect("EXISTS"));
        st.if_exists = true;
      }
      RILL_ASSIGN_OR_RAISE(st.name, Name("a name"));
      if (Accept("CASCADE")) {
        st.cascade = true;
      } else {
        Accept("RESTRICT");
      }
    } else if (Accept("SHOW")) {
      st.verb = DdlStatement::Verb::kShow;
      if (Accept("TABLES")) {
        st.object = DdlObject::kTable;
      } else if (Accept("SOURCES")) {
        st.object = DdlObject::kSource;
      } else if (Accept("VIEWS")) {
        st.object = DdlObject::kMaterializedView;
        st.show_all_views = true;
      } else if (Accept("MATERIALIZED")) {
        RILL_RETURN_NOT_OK(Expect("VIEWS"));
        st.object = DdlObject::kMaterializedView;
      } else if (Accept("STREAM")) {
        RILL_RETURN_NOT_OK(Expect("VIEWS"));
        st.object = DdlObject::kStreamView;
      } else if (Accept("SINKS")) {
        st.object = DdlObject::kSink;
      } else if (Accept("WINDOWS")) {
        st.object = DdlObject::kWindow;
      } else if (Accept("KPIS")) {
        st.object = DdlObject::kKpi;
      } else if (Accept("ALERT")) {
        RILL_RETURN_NOT_OK(Expect("RULES"));
        st.object = DdlObject::kAlertRule;
      } else {
        return Unexpected("TABLES, SOURCES, VIEWS, SINKS, WINDOWS, KPIS or ALERT RULES");
      }
    } else {
      return Unexpected("CREATE, DROP or SHOW");
    }
    Accept(";");
    if (Peek().kind != Token::Kind::kEnd) return Unexpected("the end of the statement");
    return st;
  }

 private:
  const Token& Peek(size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  bool IsWord(const Token& t, const char* word) const {
    return t.kind == Token::Kind::kWord && t.text == word;
  }
  bool IsSymbol(const Token& t, const char* symbol) const {
    return t.kind == Token::Kind::kSymbol && t.text == symbol;
  }
  /// Consume the keyword or symbol `what` when it is next.
  bool Accept(const char* what) {
    const Token& t = Peek();
    if (IsWord(t, what) || IsSymbol(t, what)) {
      ++pos_;
      return true;
    }
    return false;
  }
  Status Expect(const char* what) {
    if (Accept(what)) return Status::OK();
    return Unexpected(what);
  }
  Status Unexpected(const std::string& expected) const {
    const Token& t = Peek();
    if (t.kind == Token::Kind::kEnd) {
      return SyntaxError("syntax error at end of input (expected " + expected + ")");
    }
    return SyntaxError("syntax error at or near \"" + t.raw + "\" (expected " + expected + ")");
  }

  Result<DdlObject> Object() {
    if (Accept("TABLE")) return DdlObject::kTable;
    if (Accept("SOURCE")) return DdlObject::kSource;
    if (Accept("MATERIALIZED")) {
      RILL_RETURN_NOT_OK(Expect("VIEW"));
      return DdlObject::kMaterializedView;
    }
    if (Accept("STREAM")) {
      RILL_RETURN_NOT_OK(Expect("VIEW"));
      return DdlObject::kStreamView;
    }
    if (Accept("WINDOW")) return DdlObject::kWindow;
    if (Accept("SINK")) return DdlObject::kSink;
    if (Accept("KPI")) return DdlObject::kKpi;
    if (Accept("ALERT")) {
      RILL_RETURN_NOT_OK(Expect("RULE"));
      return DdlObject::kAlertRule;
    }
    return Unexpected(
        "TABLE, SOURCE, MATERIALIZED VIEW, STREAM VIEW, WINDOW, SINK, KPI or ALERT RULE");
  }

  /// A name: an identifier (folded to lower case) or a "quoted name".
  Result<std::string> Name(const char* what) {
    const Token& t = Peek();
    if (t.kind == Token::Kind::kWord) {
      ++pos_;
      return Lower(t.raw);
    }
    if (t.kind == Token::Kind::kQuotedName) {
      ++pos_;
      return t.text;
    }
    return Unexpected(what);
  }

  Status CreateBody(DdlStatement* st) {
    const DdlObject o = st->object;
    if (o == DdlObject::kTable) {
      RILL_RETURN_NOT_OK(Columns(st));
      if (Accept("WITH")) RILL_RETURN_NOT_OK(With(st));
      return Status::OK();
    }
    if (o == DdlObject::kSource) {
      RILL_RETURN_NOT_OK(Expect("INTO"));
      RILL_ASSIGN_OR_RAISE(st->into, Name("the target table's name"));
      RILL_RETURN_NOT_OK(Expect("WITH"));
      return With(st);
    }
    if (o == DdlObject::kSink) {
      RILL_RETURN_NOT_OK(Expect("FROM"));
      RILL_ASSIGN_OR_RAISE(st->from, Name("the source table's name"));
      RILL_RETURN_NOT_OK(Expect("WITH"));
      return With(st);
    }
    if (o == DdlObject::kWindow || o == DdlObject::kAlertRule) {
      RILL_RETURN_NOT_OK(Expect("WITH"));
      return With(st);
    }
    // Materialized views, stream views and KPIs: [WITH (...)] AS query.
    if (Accept("WITH")) RILL_RETURN_NOT_OK(With(st));
    RILL_RETURN_NOT_OK(Expect("AS"));
    return Query(st);
  }

  /// The rest of the statement, as written (the query DuckDB will bind).
  Status Query(DdlStatement* st) {
    const Token& t = Peek();
    if (t.kind == Token::Kind::kEnd || IsSymbol(t, ";")) return Unexpected("a query");
    size_t end = sql_.size();
    // Drop a trailing `;` (and blanks) but keep the query's own text.
    while (end > t.begin && (std::isspace(static_cast<unsigned char>(sql_[end - 1])) ||
                             sql_[end - 1] == ';')) {
      --end;
    }
    st->query = std::string(sql_.substr(t.begin, end - t.begin));
    if (!IsWord(t, "SELECT") && !IsWord(t, "WITH") && !IsWord(t, "FROM") &&
        !IsSymbol(t, "(") && !IsWord(t, "VALUES") && !IsWord(t, "TABLE")) {
      return Unexpected("a query (SELECT ...)");
    }
    pos_ = tokens_.size() - 1;  // the end
    return Status::OK();
  }

  /// ( option = value, ... )
  Status With(DdlStatement* st) {
    RILL_RETURN_NOT_OK(Expect("("));
    std::set<std::string> seen;
    while (true) {
      RILL_ASSIGN_OR_RAISE(std::string key, Name("an option name"));
      RILL_RETURN_NOT_OK(Expect("="));
      const Token& v = Peek();
      OptionValue value;
      value.where = "option '" + key + "'";
      switch (v.kind) {
        case Token::Kind::kString:
        case Token::Kind::kNumber:
          value.text = v.text;
          break;
        case Token::Kind::kWord:
          value.text = Lower(v.raw);  // true, false, tumbling, ...
          break;
        default:
          return Unexpected("a value ('text', a number, true or false)");
      }
      ++pos_;
      st->with.emplace_back(std::move(key), std::move(value));
      if (Accept(",")) continue;
      RILL_RETURN_NOT_OK(Expect(")"));
      return Status::OK();
    }
  }

  /// ( column type [NOT NULL | NULL] [PRIMARY KEY], ..., [PRIMARY KEY (a, b)] )
  Status Columns(DdlStatement* st) {
    RILL_RETURN_NOT_OK(Expect("("));
    std::set<std::string> names;
    bool key_clause = false;
    while (true) {
      if (IsWord(Peek(), "PRIMARY") && IsWord(Peek(1), "KEY")) {
        pos_ += 2;
        if (key_clause || !st->primary_key.empty()) {
          return SyntaxError("multiple primary keys for table \"" + st->name + "\"");
        }
        key_clause = true;
        RILL_RETURN_NOT_OK(Expect("("));
        while (true) {
          RILL_ASSIGN_OR_RAISE(std::string col, Name("a column name"));
          st->primary_key.push_back(std::move(col));
          if (Accept(",")) continue;
          RILL_RETURN_NOT_OK(Expect(")"));
          break;
        }
      } else {
        DdlColumn col;
        RILL_ASSIGN_OR_RAISE(col.name, Name("a column name"));
        if (!names.insert(col.name).second) {
          return DeclError("42701", "column \"" + col.name + "\" specified more than once");
        }
        RILL_RETURN_NOT_OK(Type(&col));
        while (true) {
          if (Accept("NOT")) {
            RILL_RETURN_NOT_OK(Expect("NULL"));
            col.not_null = true;
          } else if (Accept("NULL")) {
            col.not_null = false;
          } else if (IsWord(Peek(), "PRIMARY") && IsWord(Peek(1), "KEY")) {
            pos_ += 2;
            if (key_clause || !st->primary_key.empty()) {
              return SyntaxError("multiple primary keys for table \"" + st->name + "\"");
            }
            st->primary_key.push_back(col.name);
            col.not_null = true;
          } else {
            break;
          }
        }
        st->columns.push_back(std::move(col));
      }
      if (Accept(",")) continue;
      RILL_RETURN_NOT_OK(Expect(")"));
      break;
    }
    if (st->columns.empty()) return SyntaxError("a table needs at least one column");
    for (const std::string& key : st->primary_key) {
      if (names.count(key) == 0) {
        return DeclError("42703", "column \"" + key + "\" named in key does not exist");
      }
    }
    for (DdlColumn& c : st->columns) {
      for (const std::string& key : st->primary_key) {
        if (c.name == key) c.not_null = true;
      }
    }
    return Status::OK();
  }

  /// A SQL type name, mapped to the pipeline file's type names.
  Status Type(DdlColumn* col) {
    const Token& t = Peek();
    if (t.kind != Token::Kind::kWord) return Unexpected("a type name");
    ++pos_;
    std::string sql = t.text;
    auto skip_length = [&]() -> Status {  // VARCHAR(20), NUMERIC(10, 2): the bounds are not kept
      if (!Accept("(")) return Status::OK();
      while (!Accept(")")) {
        if (Peek().kind == Token::Kind::kEnd) return Unexpected(")");
        ++pos_;
      }
      return Status::OK();
    };
    if (sql == "DOUBLE") {
      if (Accept("PRECISION")) sql = "DOUBLE PRECISION";
    } else if (sql == "CHARACTER" && Accept("VARYING")) {
      sql = "CHARACTER VARYING";
    } else if (sql == "TIMESTAMP" || sql == "TIME") {
      if (Accept("WITH")) {
        RILL_RETURN_NOT_OK(Expect("TIME"));
        RILL_RETURN_NOT_OK(Expect("ZONE"));
        sql += " WITH TIME ZONE";
      } else if (Accept("WITHOUT")) {
        RILL_RETURN_NOT_OK(Expect("TIME"));
        RILL_RETURN_NOT_OK(Expect("ZONE"));
      }
    }
    static const std::pair<const char*, const char*> kTypes[] = {
        {"BIGINT", "int64"},        {"INT8", "int64"},
        {"INTEGER", "int32"},       {"INT", "int32"},
        {"INT4", "int32"},          {"SMALLINT", "int16"},
        {"INT2", "int16"},          {"TINYINT", "int8"},
        {"HUGEINT", ""},            {"UBIGINT", "uint64"},
        {"UINTEGER", "uint32"},     {"USMALLINT", "uint16"},
        {"UTINYINT", "uint8"},      {"DOUBLE", "float64"},
        {"DOUBLE PRECISION", "float64"}, {"FLOAT8", "float64"},
        {"FLOAT", "float64"},       {"REAL", "float32"},
        {"FLOAT4", "float32"},      {"TEXT", "string"},
        {"VARCHAR", "string"},      {"CHARACTER VARYING", "string"},
        {"STRING", "string"},       {"CHAR", "string"},
        {"BOOLEAN", "bool"},        {"BOOL", "bool"},
        {"DATE", "date32"},         {"TIMESTAMP", "timestamp"},
        {"TIMESTAMP WITH TIME ZONE", "timestamp[us, UTC]"},
        {"TIMESTAMPTZ", "timestamp[us, UTC]"},
        {"BYTEA", "binary"},        {"BLOB", "binary"},
        {"BINARY", "binary"},       {"VARBINARY", "binary"},
    };
    for (const auto& [name, type] : kTypes) {
      if (sql == name && type[0] != '\0') {
        RILL_RETURN_NOT_OK(skip_length());
        col->sql_type = sql;
        col->type = type;
        return Status::OK();
      }
    }
    return DeclError(kSqlStateUndefined, "type \"" + Lower(sql) + "\" does not exist");
  }

  std::string_view sql_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
};

}  // namespace

const char* DdlObjectName(DdlObject object) {
  switch (object) {
    case DdlObject::kTable:
      return "TABLE";
    case DdlObject::kSource:
      return "SOURCE";
    case DdlObject::kMaterializedView:
      return "MATERIALIZED VIEW";
    case DdlObject::kStreamView:
      return "STREAM VIEW";
    case DdlObject::kWindow:
      return "WINDOW";
    case DdlObject::kSink:
      return "SINK";
    case DdlObject::kKpi:
      return "KPI";
    case DdlObject::kAlertRule:
      return "ALERT RULE";
  }
  return "?";
}

Result<DdlStatement> ParseDdl(std::string_view sql) {
  RILL_ASSIGN_OR_RAISE(auto tokens, Tokenize(sql));
  Parser parser(sql, std::move(tokens));
  return parser.Statement();
}

bool IsDdl(std::string_view sql) {
  auto tokens = Tokenize(sql);
  // A statement that does not tokenize may still be DDL with a typo in its
  // body: decide on the first word alone.
  size_t i = SkipBlanks(sql, 0);
  size_t j = i;
  while (j < sql.size() && IsIdentChar(sql[j])) ++j;
  const std::string first = Upper(sql.substr(i, j - i));
  if (first == "CREATE" || first == "DROP") return true;
  if (first != "SHOW") return false;
  if (!tokens.ok() || tokens->size() < 2) return false;
  const std::string second = (*tokens)[1].kind == Token::Kind::kWord ? (*tokens)[1].text : "";
  static const std::set<std::string> kLists = {"TABLES", "SOURCES", "VIEWS",      "SINKS",
                                               "WINDOWS", "KPIS",   "MATERIALIZED", "STREAM",
                                               "ALERT"};
  if (kLists.count(second) == 0) return false;
  if (second == "ALERT") return tokens->size() > 2 && (*tokens)[2].text == "RULES";
  return true;
}

bool IsShowDdl(std::string_view sql) {
  size_t i = SkipBlanks(sql, 0);
  size_t j = i;
  while (j < sql.size() && IsIdentChar(sql[j])) ++j;
  return Upper(sql.substr(i, j - i)) == "SHOW" && IsDdl(sql);
}

std::string QuoteName(std::string_view name) {
  bool bare = !name.empty() && (std::islower(static_cast<unsigned char>(name[0])) ||
                                name[0] == '_');
  for (char c : name) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '_')) {
      bare = false;
    }
  }
  static const std::set<std::string> kReserved = {
      "all",   "and",   "as",     "by",     "create", "drop",  "from", "group", "into",
      "key",   "not",   "null",   "or",     "order",  "primary", "select", "show", "table",
      "where", "with",  "window", "source", "sink",   "view",  "user", "default"};
  if (bare && kReserved.count(std::string(name)) == 0) return std::string(name);
  std::string out = "\"";
  for (char c : name) {
    out += c;
    if (c == '"') out += '"';
  }
  return out + "\"";
}

std::string QuoteLiteral(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    out += c;
    if (c == '\'') out += '\'';
  }
  return out + "'";
}

}  // namespace rill::pipeline
