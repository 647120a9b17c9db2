# Warnings for the project's own targets (never for dependencies).
add_library(rill_warnings INTERFACE)
target_compile_options(rill_warnings INTERFACE -Wall -Wextra -Wno-unused-parameter)
