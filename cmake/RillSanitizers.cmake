# RILL_SANITIZE=address,undefined | thread applies to every target of the build.
if(RILL_SANITIZE)
  add_compile_options(-fsanitize=${RILL_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=${RILL_SANITIZE})
endif()
