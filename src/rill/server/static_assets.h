// The static files (the dashboard) a server serves: GET on any path outside
// /api, /healthz and /metrics looks up an asset in the map of that server.
// Each Server holds its own map (read at Start() from its dashboard_dir), so
// two servers in one process serve their own dashboards.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace rill::server {

struct StaticAsset {
  std::string content_type;
  std::string body;
};

/// Path ("/" or "/app.js") -> asset.
using StaticAssetMap = std::map<std::string, StaticAsset, std::less<>>;

/// Return the placeholder page served when no dashboard bundle is found. Any
/// thread.
std::shared_ptr<const StaticAssetMap> DefaultStaticAssets();
/// Read every file under `folder` into a map (paths relative to it, "/index.html"
/// also served at "/"). Content types by extension. Any thread.
std::shared_ptr<const StaticAssetMap> LoadStaticAssetFolder(const std::string& folder);
/// Return the asset of `map` (may be null: none) for `path`, or null. "/" maps
/// to "/index.html" when present. The asset shares the map's lifetime. Any thread.
std::shared_ptr<const StaticAsset> FindStaticAsset(
    const std::shared_ptr<const StaticAssetMap>& map, std::string_view path);

}  // namespace rill::server
