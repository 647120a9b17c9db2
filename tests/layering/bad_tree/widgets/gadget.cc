// Breaks the rule: a folder that is in no layer.
#include "rill/common/status.h"
