// Breaks the rule: another folder's private header.
#include "rill/table/gather_internal.h"
