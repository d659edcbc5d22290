# Builds lshk with cargo and installs the C library into a prefix, laid out
# as packagers expect. GNU make. Details and the installed layout:
# docs/install.md.
#
#   make                                          # cargo build --release
#   make install PREFIX=/usr/local                # builds first, then installs
#   sudo make install NO_BUILD=1                  # after `make`: installs only, never runs cargo
#   make install NO_BUILD=1 PREFIX=/usr DESTDIR=$PWD/pkgroot   # a package's staging tree
#   make uninstall PREFIX=/usr/local              # same PREFIX, LIBDIR, DESTDIR as install
#
# Installed:
#   $(INCLUDEDIR)/lshk.h lshk.hpp lshk_iul.hpp
#   $(LIBDIR)/liblshk.so.X.Y.Z (the file), liblshk.so.<abi> -> it (the
#     SONAME), liblshk.so -> liblshk.so.<abi> (for -llshk), liblshk.a
#   $(PKGCONFIGDIR)/lshk.pc
#   $(CMAKEDIR)/lshkConfig.cmake, lshkConfigVersion.cmake (from cmake/*.in;
#     paths relative to the file itself, so the prefix can be moved)
#
# Variables (on the command line):
#   PROFILE=release  cargo profile to build and install (debug, release or a
#                    custom one); its artifacts are read from LSHK_BUILD_DIR,
#                    default $(CARGO_TARGET_DIR or ./target)/$(PROFILE)
#                    (target/release for bench, target/debug for test)
#   NO_BUILD=1       `install` does not run cargo; it installs what
#                    LSHK_BUILD_DIR holds (and fails if it is missing)
#   PREFIX=/usr/local, LIBDIR=$(PREFIX)/lib, INCLUDEDIR=$(PREFIX)/include,
#   PKGCONFIGDIR=$(LIBDIR)/pkgconfig, CMAKEDIR=$(LIBDIR)/cmake/lshk,
#   DESTDIR=         prepended to every path written, never to the paths
#                    recorded in lshk.pc or the CMake files
#   CARGO=cargo, CARGO_FLAGS= (extra `cargo build` arguments), INSTALL=install,
#   READELF=readelf (optional: checks the library's SONAME before installing)
#
# The version (and with it the file names and the SONAME) comes from
# Cargo.toml's [package] version, as build.rs derives it: the SONAME is
# liblshk.so.<abi>, <abi> = 0.<minor> while the major version is 0, else
# <major>.

SRCDIR := $(dir $(abspath $(lastword $(MAKEFILE_LIST))))

CARGO      ?= cargo
CARGO_FLAGS ?=
PROFILE    ?= release
INSTALL    ?= install
READELF    ?= readelf
PREFIX     ?= /usr/local
DESTDIR    ?=
# "/usr/local/" and "/usr/local" are the same prefix (and "/" becomes "").
override PREFIX := $(patsubst %/,%,$(PREFIX))
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
CMAKEDIR     ?= $(LIBDIR)/cmake/lshk

TARGET_DIR     := $(if $(CARGO_TARGET_DIR),$(CARGO_TARGET_DIR),$(SRCDIR)target)
# cargo's output directory of a profile: its name, except for the built-in
# bench and test profiles.
_profile_dir   := $(if $(filter bench,$(PROFILE)),release,$(if $(filter test,$(PROFILE)),debug,$(PROFILE)))
LSHK_BUILD_DIR ?= $(TARGET_DIR)/$(_profile_dir)

# NO_BUILD=0/no/false count as unset.
_no_build := $(filter-out 0 no false,$(strip $(NO_BUILD)))

ifeq ($(PROFILE),release)
_cargo_profile := --release
else ifeq ($(PROFILE),debug)
_cargo_profile :=
else
_cargo_profile := --profile $(PROFILE)
endif

# ---- version: Cargo.toml's [package] version, nowhere else ----
LSHK_VERSION := $(shell sed -n '/^\[package\]/,/^\[/ s/^version[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\1/p' '$(SRCDIR)Cargo.toml' | head -n 1)
ifeq ($(LSHK_VERSION),)
$(error could not read the [package] version from $(SRCDIR)Cargo.toml)
endif
# X.Y.Z without a pre-release or build suffix (file names, CMake versions).
LSHK_VERSION_NUM := $(firstword $(subst -, ,$(subst +, ,$(LSHK_VERSION))))
_v := $(subst ., ,$(LSHK_VERSION_NUM))
LSHK_ABI := $(if $(filter 0,$(word 1,$(_v))),0.$(word 2,$(_v)),$(word 1,$(_v)))
SONAME   := liblshk.so.$(LSHK_ABI)
REALNAME := liblshk.so.$(LSHK_VERSION_NUM)

HEADERS := lshk.h lshk.hpp lshk_iul.hpp

# ---- paths recorded in the installed files ----
_empty :=
_space := $(_empty) $(_empty)
# $(call _below_prefix,DIR): DIR relative to PREFIX; empty when DIR is not below it.
_below_prefix = $(patsubst $(PREFIX)/%,%,$(filter $(PREFIX)/%,$(1)))
# $(call _from_var,DIR,VAR): "${VAR}/<DIR below PREFIX>", or DIR itself
# (absolute) when it is not below PREFIX.
_from_var = $(if $(call _below_prefix,$(1)),$${$(2)}/$(call _below_prefix,$(1)),$(1))
PC_LIBDIR     := $(call _from_var,$(LIBDIR),exec_prefix)
PC_INCLUDEDIR := $(call _from_var,$(INCLUDEDIR),prefix)
# lshkConfig.cmake finds the prefix by climbing from its own directory (one
# ".." per component of CMAKEDIR below PREFIX).
_cmake_rel := $(call _below_prefix,$(CMAKEDIR))
CMAKE_PREFIX_EXPR     := $(if $(_cmake_rel),$${CMAKE_CURRENT_LIST_DIR}/$(subst $(_space),/,$(foreach d,$(subst /, ,$(_cmake_rel)),..)),$(PREFIX))
CMAKE_LIBDIR_EXPR     := $(if $(_cmake_rel),$(call _from_var,$(LIBDIR),_lshk_prefix),$(LIBDIR))
CMAKE_INCLUDEDIR_EXPR := $(if $(_cmake_rel),$(call _from_var,$(INCLUDEDIR),_lshk_prefix),$(INCLUDEDIR))

CMAKE_SUBST := \
  -e 's|@LSHK_VERSION@|$(LSHK_VERSION_NUM)|g' \
  -e 's|@LSHK_ABI@|$(LSHK_ABI)|g' \
  -e 's|@LSHK_SONAME@|$(SONAME)|g' \
  -e 's|@LSHK_REALNAME@|$(REALNAME)|g' \
  -e 's|@LSHK_PREFIX@|$(CMAKE_PREFIX_EXPR)|g' \
  -e 's|@LSHK_INSTALL_PREFIX@|$(PREFIX)|g' \
  -e 's|@LSHK_CMAKEDIR@|$(CMAKEDIR)|g' \
  -e 's|@LSHK_LIBDIR@|$(CMAKE_LIBDIR_EXPR)|g' \
  -e 's|@LSHK_INCLUDEDIR@|$(CMAKE_INCLUDEDIR_EXPR)|g'

D_INC   := $(DESTDIR)$(INCLUDEDIR)
D_LIB   := $(DESTDIR)$(LIBDIR)
D_PC    := $(DESTDIR)$(PKGCONFIGDIR)
D_CMAKE := $(DESTDIR)$(CMAKEDIR)

.PHONY: all build install uninstall install-check
all: build

build:
	$(CARGO) build --manifest-path '$(SRCDIR)Cargo.toml' $(_cargo_profile) $(CARGO_FLAGS)

# What install reads must exist and carry this version's SONAME (a stale
# build of another version would otherwise be installed under this
# version's names).
install-check: $(if $(_no_build),,build)
	@case '$(PREFIX)' in /*|'') ;; *) echo "error: PREFIX must be an absolute path (got '$(PREFIX)')" >&2; exit 1;; esac
	@for f in '$(LSHK_BUILD_DIR)/liblshk.so' '$(LSHK_BUILD_DIR)/liblshk.a'; do \
	  if [ ! -f "$$f" ]; then \
	    echo "error: $$f not found: run \`make PROFILE=$(PROFILE)\` (or \`cargo build$(if $(_cargo_profile), $(_cargo_profile))\`) first, or set LSHK_BUILD_DIR" >&2; \
	    exit 1; \
	  fi; \
	done
	@if command -v $(READELF) >/dev/null 2>&1; then \
	  so=$$($(READELF) -d '$(LSHK_BUILD_DIR)/liblshk.so' | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p'); \
	  if [ "$$so" != '$(SONAME)' ]; then \
	    echo "error: $(LSHK_BUILD_DIR)/liblshk.so has SONAME '$$so', but Cargo.toml's version $(LSHK_VERSION) needs $(SONAME): rebuild it" >&2; \
	    exit 1; \
	  fi; \
	fi

install: install-check
	$(INSTALL) -d '$(D_INC)' '$(D_LIB)' '$(D_PC)' '$(D_CMAKE)'
	$(INSTALL) -m 644 $(HEADERS:%='$(SRCDIR)include/%') '$(D_INC)/'
	$(INSTALL) -m 755 '$(LSHK_BUILD_DIR)/liblshk.so' '$(D_LIB)/$(REALNAME)'
	ln -sf '$(REALNAME)' '$(D_LIB)/$(SONAME)'
	ln -sf '$(SONAME)' '$(D_LIB)/liblshk.so'
	$(INSTALL) -m 644 '$(LSHK_BUILD_DIR)/liblshk.a' '$(D_LIB)/liblshk.a'
	printf '%s\n' \
	  'prefix=$(PREFIX)' \
	  'exec_prefix=$${prefix}' \
	  'libdir=$(PC_LIBDIR)' \
	  'includedir=$(PC_INCLUDEDIR)' \
	  '' \
	  'Name: lshk' \
	  'Description: SIMD kernels for sublinear wide output layers (LSH)' \
	  'Version: $(LSHK_VERSION)' \
	  'Cflags: -I$${includedir}' \
	  'Libs: -L$${libdir} -llshk' \
	  'Libs.private: -lpthread -ldl -lm' > '$(D_PC)/lshk.pc'
	chmod 644 '$(D_PC)/lshk.pc'
	sed $(CMAKE_SUBST) '$(SRCDIR)cmake/lshkConfig.cmake.in' > '$(D_CMAKE)/lshkConfig.cmake'
# (the version file's CMAKE_SIZEOF_VOID_P: the library's ELF class, byte 4:
# 1 = 32-bit, 2 = 64-bit)
	class=$$(od -An -tu1 -j4 -N1 '$(LSHK_BUILD_DIR)/liblshk.so' | tr -d ' '); \
	case "$$class" in 1) ptr=4;; 2) ptr=8;; *) ptr=;; esac; \
	sed $(CMAKE_SUBST) -e "s|@LSHK_SIZEOF_VOID_P@|$$ptr|g" '$(SRCDIR)cmake/lshkConfigVersion.cmake.in' > '$(D_CMAKE)/lshkConfigVersion.cmake'
	chmod 644 '$(D_CMAKE)/lshkConfig.cmake' '$(D_CMAKE)/lshkConfigVersion.cmake'

# Removes what install wrote (and the lshk CMake directory when it is then
# empty); shared directories (include, lib, pkgconfig, cmake) stay.
uninstall:
	rm -f $(HEADERS:%='$(D_INC)/%')
	rm -f '$(D_LIB)/liblshk.so' '$(D_LIB)/$(SONAME)' '$(D_LIB)/$(REALNAME)' '$(D_LIB)/liblshk.a'
	rm -f '$(D_PC)/lshk.pc'
	rm -f '$(D_CMAKE)/lshkConfig.cmake' '$(D_CMAKE)/lshkConfigVersion.cmake'
	rmdir '$(D_CMAKE)' 2>/dev/null || true
