# loom build. `make` builds build/loom; `make test` builds and runs every test (plain and ASan/UBSan);
# `make bench` runs the benchmarks. The reference engine (llama.cpp from npm) is found in $(LOOM_REF),
# fetched there by scripts/setup.sh; parity tests and reference tools link against it.

CC      ?= cc
# The sanitized half of `make test` is built with clang, so that the suite compiles and runs loom with both
# GCC (cc) and clang; scripts/setup.sh installs it.
CC_SAN  ?= clang
BUILD   ?= build
LOOM_CACHE ?= $(HOME)/.cache/loom
LOOM_REF   ?= $(LOOM_CACHE)/ref
REF_BINS = $(LOOM_REF)/bins/package/bins/linux-x64
REF_SRC  = $(LOOM_REF)/src

OPT     ?= -O2
WERROR ?= -Werror
# -ffp-contract=off: no compiler fuses a * b + c on its own (GCC's default in ISO C mode, not clang's);
# loom's results are bitwise the reference's only with fmaf exactly where the reference fuses.
CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -Wall -Wextra $(WERROR) -g $(OPT) -Iinclude -Isrc -fno-math-errno \
              -ffp-contract=off
# LOOM_SANITIZED tells tests they run sanitized (GCC defines __SANITIZE_ADDRESS__, clang 14 does not); they
# stop at the first UBSan report through the runtime (tests/test.h) rather than -fno-sanitize-recover, with
# which clang 14 spends minutes compiling the always_inline Q4_K x16 tiles.
CFLAGS_SAN  = -fsanitize=address,undefined -fno-omit-frame-pointer -DLOOM_SANITIZED
LIBS    = -lutf8proc -lxxhash -ljansson -levent -levent_pthreads -luring -lpthread -lm
REF_CFLAGS = -I$(REF_SRC)/include -I$(REF_SRC)/ggml/include
REF_LIBS   = -L$(REF_BINS) -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so -l:libggml-base.so -Wl,-rpath,$(REF_BINS)

ifeq ($(SAN),1)
override BUILD := $(BUILD)-san
CFLAGS_BASE += $(CFLAGS_SAN)
LDFLAGS += $(CFLAGS_SAN)
endif

AVX2_FLAGS   = -mavx2 -mfma -mf16c -mbmi2
AVX512_FLAGS = $(AVX2_FLAGS) -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16

LIB_SRC  := $(shell find src -name '*.c' ! -path 'src/cli/*' | sort)
CLI_SRC  := $(shell find src/cli -name '*.c' | sort)
TEST_SRC := $(wildcard tests/test_*.c)
REFTEST_SRC := $(wildcard tests/parity/*.c)
TOOL_SRC := $(wildcard tools/*.c)
BENCH_SRC := $(wildcard bench/*.c)

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
LIB     := $(BUILD)/libloom.a
TESTS   := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
REFTESTS := $(REFTEST_SRC:tests/parity/%.c=$(BUILD)/tests/parity/%)
TOOLS   := $(TOOL_SRC:tools/%.c=$(BUILD)/tools/%)
BENCHES := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

.PHONY: all test test-unit test-san ref bench clean FORCE
all: $(BUILD)/loom $(TESTS)
ref: $(REFTESTS) $(TOOLS)

# The compiler and flags a build folder was made with: when they change (say CC=clang after cc), everything
# in it is rebuilt rather than objects of two compilers being linked together.
CONFIG := $(BUILD)/config
$(CONFIG): FORCE
	@mkdir -p $(dir $@)
	@echo '$(CC) $(CFLAGS_BASE) $(LDFLAGS)' | cmp -s - $@ || echo '$(CC) $(CFLAGS_BASE) $(LDFLAGS)' >$@

$(BUILD)/obj/%_avx2.o: %_avx2.c $(CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(AVX2_FLAGS) -MMD -MP -c $< -o $@
$(BUILD)/obj/%_avx512.o: %_avx512.c $(CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(AVX512_FLAGS) -MMD -MP -c $< -o $@
$(BUILD)/obj/%.o: %.c $(CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/loom: $(CLI_OBJ) $(LIB) $(CONFIG)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(LIB) $(LIBS)

$(BUILD)/tests/%: tests/%.c $(LIB) $(wildcard tests/*.h) $(CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Itests $(LDFLAGS) -o $@ $< $(LIB) $(LIBS)

# Parity tests and reference tools use the reference's headers and prebuilt libraries.
$(BUILD)/tests/parity/%: tests/parity/%.c $(LIB) $(wildcard tests/*.h) $(wildcard tests/parity/*.h) $(CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Itests -Itests/parity $(REF_CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(REF_LIBS) $(LIBS)
$(BUILD)/tools/%: tools/%.c $(LIB) $(CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(REF_CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(REF_LIBS) $(LIBS)
$(BUILD)/bench/%: bench/%.c $(LIB) $(CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(REF_CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(REF_LIBS) $(LIBS)

# The whole suite: unit tests plain ($(CC)) and under ASan/UBSan ($(CC_SAN)), then parity against the reference.
test: all ref
	@command -v $(CC_SAN) >/dev/null || { echo "make test: the sanitized tests are built with $(CC_SAN)," \
	    "which is not installed (bash scripts/setup.sh installs clang; or pass CC_SAN=cc)"; exit 1; }
	$(MAKE) SAN=1 OPT=-O1 CC=$(CC_SAN) all
	LOOM_REF=$(LOOM_REF) LOOM_CACHE=$(LOOM_CACHE) scripts/run-tests.sh $(BUILD) $(BUILD)-san

bench: $(BUILD)/loom $(BENCHES) $(TOOLS)
	LOOM_REF=$(LOOM_REF) LOOM_CACHE=$(LOOM_CACHE) scripts/run-bench.sh $(BUILD)

clean:
	rm -rf build build-san

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
