// A real PostgreSQL server for the C++ sink tests: one per test process,
// started on first use (a copy of an initdb'd template directory, made once
// per machine under /dev/shm (or /tmp), then pg_ctl start on a free port of 127.0.0.1,
// wal_level=logical), stopped and removed at exit.
//
//     TEST(PostgresSinkWriter, ...) {
//       RILL_REQUIRE_PG(server);           // skips (fails under CI=true) without one
//       std::string dsn = server->dsn();
//
// As root it runs initdb and pg_ctl as user `postgres` (`runuser -u postgres`:
// the server refuses root). Without initdb (Debian `postgresql`) the tests
// skip, or fail when CI=true, like the Python suite's require().
//
// Threads: the test's main thread only.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace rill::testing {

class PgTestServer {
 public:
  /// The process's server, started on first call; nullptr (and `why`) when
  /// there is none.
  static PgTestServer* Get(std::string* why) {
    static std::string failure;
    static std::unique_ptr<PgTestServer> server = Start(&failure);
    *why = failure;
    return server.get();
  }

  ~PgTestServer() {
    Run(As(bin_ + "/pg_ctl -D " + dir_ + "/data -m immediate -w stop") + " > /dev/null 2>&1");
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  /// A libpq connection string to database `db` as user postgres (trust auth).
  std::string dsn(const std::string& db = "postgres") const {
    return "host=127.0.0.1 port=" + std::to_string(port_) + " user=postgres dbname=" + db;
  }
  int port() const { return port_; }
  /// Stop (fast) and start the server again on the same port.
  bool Stop() { return Run(As(bin_ + "/pg_ctl -D " + dir_ + "/data -m fast -w stop") + Quiet()); }
  bool Restart() { return Run(StartCommand()); }

  static bool UnderCi() {
    const char* ci = std::getenv("CI");
    return ci != nullptr && std::string(ci) == "true";
  }

 private:
  static std::string FindBin() {
    for (const char* version : {"15", "16", "17", "14", "13"}) {
      std::string bin = std::string("/usr/lib/postgresql/") + version + "/bin";
      if (std::filesystem::exists(bin + "/initdb")) return bin;
    }
    return "";
  }

  static int FreePort() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    int port = 0;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port = ntohs(addr.sin_port);
    }
    close(fd);
    return port;
  }

  /// tmpfs when there is one (the data are small; the disk may be busy).
  static std::string TempRoot() {
    return access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  }

  static bool Run(const std::string& command) { return std::system(command.c_str()) == 0; }
  static std::string Quiet() { return " > /dev/null 2>&1"; }

  std::string As(const std::string& command) const {
    return as_root_ ? "runuser -u postgres -- " + command : command;
  }

  std::string StartCommand() const {
    return As(bin_ + "/pg_ctl -D " + dir_ + "/data -l " + dir_ + "/log -w -t 60 -o \"-p " +
              std::to_string(port_) + " -k " + dir_ +
              " -c listen_addresses=127.0.0.1 -c wal_level=logical -c fsync=off"
              " -c max_connections=50\" start") +
           Quiet();
  }

  static std::unique_ptr<PgTestServer> Start(std::string* why) {
    auto server = std::unique_ptr<PgTestServer>(new PgTestServer());
    server->bin_ = FindBin();
    if (server->bin_.empty()) {
      *why = "no initdb under /usr/lib/postgresql/*/bin (Debian package postgresql)";
      return nullptr;
    }
    server->as_root_ = geteuid() == 0;
    std::string pattern_text = TempRoot() + "/rill-pg-XXXXXX";
    std::vector<char> pattern(pattern_text.begin(), pattern_text.end());
    pattern.push_back('\0');
    if (mkdtemp(pattern.data()) == nullptr) {
      *why = "mkdtemp failed";
      return nullptr;
    }
    server->dir_ = pattern.data();
    if (server->as_root_) {
      passwd* user = getpwnam("postgres");
      if (user == nullptr || chown(pattern.data(), user->pw_uid, user->pw_gid) != 0) {
        *why = "running as root without a `postgres` user to run the server as";
        return nullptr;
      }
    }
    server->port_ = FreePort();
    std::string tmpl = server->Template(why);
    if (tmpl.empty()) return nullptr;
    if (!Run("cp -a " + tmpl + " " + server->dir_ + "/data")) {
      *why = "copying " + tmpl + " failed";
      return nullptr;
    }
    if (!Run(server->StartCommand())) {
      *why = "pg_ctl start failed (see " + server->dir_ + "/log)";
      return nullptr;
    }
    return server;
  }

  /// An initdb'd data directory shared by the test processes of this machine
  /// (initdb takes seconds; copying it a fraction): made once, renamed into place.
  std::string Template(std::string* why) const {
    std::string version = std::filesystem::path(bin_).parent_path().filename().string();
    std::string tmpl =
        TempRoot() + "/rill-pg-template-" + version + "-" + std::to_string(geteuid());
    if (std::filesystem::exists(tmpl + "/PG_VERSION")) return tmpl;
    std::string fresh = dir_ + "/template";
    if (!Run(As(bin_ + "/initdb -D " + fresh +
                " -U postgres --auth=trust -E UTF8 --no-locale --no-sync --wal-segsize=1") +
             Quiet())) {
      *why = "initdb failed in " + dir_;
      return "";
    }
    std::error_code error;
    std::filesystem::rename(fresh, tmpl, error);  // another process may have won
    if (!std::filesystem::exists(tmpl + "/PG_VERSION")) {
      *why = "could not make " + tmpl;
      return "";
    }
    return tmpl;
  }

  PgTestServer() = default;
  std::string bin_;
  std::string dir_;
  int port_ = 0;
  bool as_root_ = false;
};

}  // namespace rill::testing

/// Declare `server` (PgTestServer*) or skip the test (fail it under CI=true).
#define RILL_REQUIRE_PG(server)                                                \
  std::string server##_why;                                                   \
  ::rill::testing::PgTestServer* server =                                     \
      ::rill::testing::PgTestServer::Get(&server##_why);                      \
  if (server == nullptr) {                                                    \
    if (::rill::testing::PgTestServer::UnderCi()) {                           \
      FAIL() << "PostgreSQL test server unavailable under CI=true: " << server##_why; \
    }                                                                         \
    GTEST_SKIP() << "PostgreSQL test server unavailable: " << server##_why;   \
  }
