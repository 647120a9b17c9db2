// A tiny scripted HTTP/1.1 server on 127.0.0.1 for webhook and CLI tests:
// counts accepted connections, records each request, answers with the
// scripted responses in order (the last one repeats).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rill::testing {

struct ReceiverResponse {
  int status = 200;
  std::string body = "ok";
  std::string extra_headers;  ///< "Name: value\r\n" lines
  bool hang = false;          ///< read the request, never answer
  std::string content_type = "text/plain";
};

struct ReceivedRequest {
  std::string method;
  std::string target;
  std::map<std::string, std::string> headers;  ///< names lowercased
  std::string body;
};

class TestReceiver {
 public:
  using Response = ReceiverResponse;
  using Request = ReceivedRequest;

  TestReceiver() : TestReceiver(std::vector<Response>(1)) {}
  explicit TestReceiver(std::vector<Response> script)
      : script_(std::move(script)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(fd_, 64);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Loop(); });
  }
  ~TestReceiver() {
    stop_.store(true);
    thread_.join();
    close(fd_);
  }

  int port() const { return port_; }
  std::string url(const std::string& path = "/hook") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  int connections() const { return connections_.load(); }
  std::vector<Request> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void Loop() {
    while (!stop_.load()) {
      pollfd p = {fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) {
        continue;
      }
      int client = accept(fd_, nullptr, nullptr);
      if (client < 0) {
        continue;
      }
      const int n = connections_.fetch_add(1);
      Serve(client, script_[std::min<size_t>(n, script_.size() - 1)]);
      close(client);
    }
  }

  /// Read one request (headers, then Content-Length bytes) within 5 s.
  bool ReadRequest(int client, Request* out) {
    std::string data;
    char buf[4096];
    size_t header_end = std::string::npos;
    size_t need = 0;
    for (int waited = 0; waited < 250 && !stop_.load();) {
      if (header_end != std::string::npos && data.size() >= header_end + 4 + need) {
        break;
      }
      pollfd p = {client, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) {
        ++waited;
        continue;
      }
      ssize_t n = recv(client, buf, sizeof(buf), 0);
      if (n <= 0) {
        return false;
      }
      data.append(buf, static_cast<size_t>(n));
      if (header_end == std::string::npos) {
        header_end = data.find("\r\n\r\n");
        if (header_end != std::string::npos) {
          ParseHead(data.substr(0, header_end), out);
          auto it = out->headers.find("content-length");
          need = it == out->headers.end() ? 0 : std::stoul(it->second);
        }
      }
    }
    if (header_end == std::string::npos) {
      return false;
    }
    out->body = data.substr(header_end + 4, need);
    return true;
  }

  static void ParseHead(const std::string& head, Request* out) {
    size_t line_end = head.find("\r\n");
    std::string first = head.substr(0, line_end);
    size_t sp1 = first.find(' ');
    size_t sp2 = first.find(' ', sp1 + 1);
    out->method = first.substr(0, sp1);
    out->target = first.substr(sp1 + 1, sp2 - sp1 - 1);
    size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      size_t end = head.find("\r\n", pos);
      if (end == std::string::npos) end = head.size();
      std::string line = head.substr(pos, end - pos);
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        std::transform(name.begin(), name.end(), name.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        size_t v = line.find_first_not_of(' ', colon + 1);
        out->headers[name] = v == std::string::npos ? "" : line.substr(v);
      }
      pos = end + 2;
    }
  }

  void Serve(int client, const Response& response) {
    Request request;
    if (!ReadRequest(client, &request)) {
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(request);
    }
    if (response.hang) {
      while (!stop_.load()) {
        pollfd p = {client, POLLIN, 0};
        if (poll(&p, 1, 20) > 0) {
          char b;
          if (recv(client, &b, 1, 0) <= 0) return;  // the client gave up
        }
      }
      return;
    }
    std::string reply = "HTTP/1.1 " + std::to_string(response.status) + " Scripted\r\n" +
                        "Content-Type: " + response.content_type + "\r\n" +
                        "Content-Length: " + std::to_string(response.body.size()) + "\r\n" +
                        response.extra_headers + "Connection: close\r\n\r\n" + response.body;
    size_t sent = 0;
    while (sent < reply.size()) {
      ssize_t n = send(client, reply.data() + sent, reply.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }

  std::vector<Response> script_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  mutable std::mutex mu_;
  std::vector<Request> requests_;
  std::thread thread_;
};

}  // namespace rill::testing
