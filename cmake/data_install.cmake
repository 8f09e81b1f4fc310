# Bundled models, texts and calibration profiles, installed under
# PREFIX/share/hqekv/ with the same relative paths as in the repository
# (models/..., data/text/..., profiles/...), with their SOURCES.md licence
# notes. The installed `hqekv` finds them there (core/file.h FindBundled:
# PREFIX/bin/hqekv -> PREFIX/share/hqekv/REL), and so does the Python
# package's hqekv.default_model().
include(GNUInstallDirs)
set(HQEKV_DATA_INSTALL_DIR ${CMAKE_INSTALL_DATADIR}/hqekv)
install(FILES ${PROJECT_SOURCE_DIR}/models/refmodel-4l.gguf ${PROJECT_SOURCE_DIR}/models/refmodel-4l.md
              ${PROJECT_SOURCE_DIR}/models/stories260K.gguf ${PROJECT_SOURCE_DIR}/models/stories260K.bin
              ${PROJECT_SOURCE_DIR}/models/tok512.bin ${PROJECT_SOURCE_DIR}/models/SOURCES.md
        DESTINATION ${HQEKV_DATA_INSTALL_DIR}/models)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/data/text DESTINATION ${HQEKV_DATA_INSTALL_DIR}/data)
install(FILES ${PROJECT_SOURCE_DIR}/data/SOURCES.md DESTINATION ${HQEKV_DATA_INSTALL_DIR}/data)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/profiles DESTINATION ${HQEKV_DATA_INSTALL_DIR})
