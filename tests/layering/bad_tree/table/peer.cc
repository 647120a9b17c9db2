// Breaks the rule: table and connector are peers.
#include "rill/connector/connector.h"
