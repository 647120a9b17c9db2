// Boost.JSON is used header-only: this file compiles its implementation once
// for librill (request bodies and the API's small JSON documents).
#include <boost/json/src.hpp>
