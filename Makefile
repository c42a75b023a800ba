# loom build. `make` builds build/loom; `make test` builds and runs every test (plain and ASan/UBSan);
# `make bench` runs the benchmarks. The reference engine (llama.cpp from npm) is found in $(LOOM_REF),
# fetched there by scripts/setup.sh; parity tests and reference tools link against it.

CC      ?= cc
BUILD   ?= build
LOOM_CACHE ?= $(HOME)/.cache/loom
LOOM_REF   ?= $(LOOM_CACHE)/ref
REF_BINS = $(LOOM_REF)/bins/package/bins/linux-x64
REF_SRC  = $(LOOM_REF)/src

OPT     ?= -O2
WERROR ?= -Werror
CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -Wall -Wextra $(WERROR) -g $(OPT) -Iinclude -Isrc -fno-math-errno
CFLAGS_SAN  = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
LIBS    = -lutf8proc -lxxhash -ljansson -lpthread -lm
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

.PHONY: all test test-unit test-san ref bench clean
all: $(BUILD)/loom $(TESTS)
ref: $(REFTESTS) $(TOOLS)

$(BUILD)/obj/%_avx2.o: %_avx2.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(AVX2_FLAGS) -MMD -MP -c $< -o $@
$(BUILD)/obj/%_avx512.o: %_avx512.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(AVX512_FLAGS) -MMD -MP -c $< -o $@
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/loom: $(CLI_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(LIB) $(LIBS)

$(BUILD)/tests/%: tests/%.c $(LIB) $(wildcard tests/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Itests $(LDFLAGS) -o $@ $< $(LIB) $(LIBS)

# Parity tests and reference tools use the reference's headers and prebuilt libraries.
$(BUILD)/tests/parity/%: tests/parity/%.c $(LIB) $(wildcard tests/*.h) $(wildcard tests/parity/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Itests -Itests/parity $(REF_CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(REF_LIBS) $(LIBS)
$(BUILD)/tools/%: tools/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(REF_CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(REF_LIBS) $(LIBS)
$(BUILD)/bench/%: bench/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(REF_CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(REF_LIBS) $(LIBS)

# The whole suite: unit tests plain and under ASan/UBSan, then parity against the reference.
test: all ref
	$(MAKE) SAN=1 OPT=-O1 all
	LOOM_REF=$(LOOM_REF) LOOM_CACHE=$(LOOM_CACHE) scripts/run-tests.sh $(BUILD) $(BUILD)-san

bench: $(BUILD)/loom $(BENCHES) $(TOOLS)
	LOOM_REF=$(LOOM_REF) LOOM_CACHE=$(LOOM_CACHE) scripts/run-bench.sh $(BUILD)

clean:
	rm -rf build build-san

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
