#include "rill/server/static_assets.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace rill::server {

namespace {

// Served until the dashboard (its own issue) installs its bundle.
constexpr const char* kPlaceholderPage = R"(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Rill</title>
<style>body{font-family:sans-serif;background:#111;color:#ddd;margin:3em}code{color:#8cf}</style>
</head><body>
<h1>Rill</h1>
<p>This engine is serving. The live dashboard comes with the dashboard issue.</p>
<p>Meanwhile: <code>GET /api/v1/info</code>, <code>POST /api/v1/query</code>,
<code>GET /metrics</code>, WebSocket <code>/api/v1/stream</code> (see docs/api.md).</p>
</body></html>
)";

std::string ContentTypeFor(const std::filesystem::path& path) {
  static const std::map<std::string, std::string> kTypes = {
      {".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},   {".json", "application/json"},
      {".svg", "image/svg+xml"},             {".png", "image/png"},
      {".ico", "image/x-icon"},              {".map", "application/json"},
      {".woff2", "font/woff2"},              {".txt", "text/plain; charset=utf-8"}};
  auto it = kTypes.find(path.extension().string());
  return it == kTypes.end() ? "application/octet-stream" : it->second;
}

}  // namespace

std::shared_ptr<const StaticAssetMap> DefaultStaticAssets() {
  static const std::shared_ptr<const StaticAssetMap> assets = [] {
    auto map = std::make_shared<StaticAssetMap>();
    (*map)["/index.html"] = StaticAsset{"text/html; charset=utf-8", kPlaceholderPage};
    return map;
  }();
  return assets;
}

std::shared_ptr<const StaticAssetMap> LoadStaticAssetFolder(const std::string& folder) {
  auto map = std::make_shared<StaticAssetMap>();
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(folder, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file()) {
      continue;
    }
    std::ifstream in(it->path(), std::ios::binary);
    std::ostringstream data;
    data << in.rdbuf();
    std::string rel = "/" + std::filesystem::relative(it->path(), folder).generic_string();
    (*map)[rel] = StaticAsset{ContentTypeFor(it->path()), data.str()};
  }
  return map;
}

std::shared_ptr<const StaticAsset> FindStaticAsset(
    const std::shared_ptr<const StaticAssetMap>& map, std::string_view path) {
  if (map == nullptr) {
    return nullptr;
  }
  if (path == "/") {
    path = "/index.html";
  }
  auto it = map->find(path);
  if (it == map->end()) {
    return nullptr;
  }
  // Aliasing constructor: the asset shares the map's lifetime.
  return std::shared_ptr<const StaticAsset>(map, &it->second);
}

}  // namespace rill::server
