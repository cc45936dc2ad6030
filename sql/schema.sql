-- The shardq schema on PostgreSQL as the migrations leave it at head (16 buckets).
-- A snapshot for review and for the drift test; the migrations are what create it.
-- The bucket column's expression is a placeholder, filled in by the drift test with
-- shardq.dialect.bucket_sql('id', 16): the bucket formula has one definition.
CREATE SCHEMA shardq;

CREATE TABLE shardq.attempts (
    task_id uuid NOT NULL,
    slot integer NOT NULL,
    attempt integer NOT NULL,
    queue text NOT NULL,
    claimed_at timestamp with time zone,
    ended_at timestamp with time zone NOT NULL,
    outcome text NOT NULL,
    error text,
    worker_id uuid,
    worker_name text,
    worker_host text,
    worker_pid integer,
    CONSTRAINT attempts_outcome CHECK ((outcome = ANY (ARRAY['acked'::text, 'failed'::text, 'lease_expired'::text, 'released'::text, 'deferred'::text, 'cancelled'::text, 'dead'::text, 'parked'::text])))
);

CREATE TABLE shardq.audit (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    at timestamp with time zone NOT NULL,
    actor text NOT NULL,
    role text NOT NULL,
    via text NOT NULL,
    action text NOT NULL,
    queue text,
    task_id uuid,
    params jsonb,
    outcome text NOT NULL,
    detail text,
    address text,
    CONSTRAINT audit_outcome_check CHECK ((outcome = ANY (ARRAY['ok'::text, 'refused'::text, 'failed'::text]))),
    CONSTRAINT audit_via_check CHECK ((via = ANY (ARRAY['page'::text, 'api'::text, 'cli'::text])))
);

CREATE TABLE shardq.flow_events (
    flow_id uuid NOT NULL,
    at timestamp with time zone NOT NULL,
    task_id uuid NOT NULL,
    outcome text NOT NULL,
    next uuid[],
    n bigint DEFAULT 1 NOT NULL,
    CONSTRAINT flow_events_outcome_check CHECK ((outcome = ANY (ARRAY['succeeded'::text, 'dead'::text, 'retried'::text, 'dropped'::text, 'cancelled'::text, 'sealed'::text])))
);

CREATE TABLE shardq.events (
    name text NOT NULL,
    payload jsonb,
    emitted_at timestamp with time zone,
    expires_at timestamp with time zone NOT NULL
);

CREATE TABLE shardq.flows (
    id uuid NOT NULL,
    kind text NOT NULL,
    name text,
    nodes bigint NOT NULL,
    result_id uuid,
    keep_result_s double precision NOT NULL,
    succeeded bigint DEFAULT 0 NOT NULL,
    dead bigint DEFAULT 0 NOT NULL,
    cancelled bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone NOT NULL,
    cancelled_at timestamp with time zone,
    finished_at timestamp with time zone,
    trace_context text,
    folded bigint DEFAULT 0 NOT NULL,
    CONSTRAINT flows_kind_check CHECK ((kind = ANY (ARRAY['chain'::text, 'group'::text, 'chord'::text, 'graph'::text, 'batch'::text, 'spawn'::text])))
);

CREATE TABLE shardq.layout (
    one boolean DEFAULT true NOT NULL,
    bucket_count integer NOT NULL,
    expression boolean DEFAULT false NOT NULL,
    generation bigint DEFAULT 0 NOT NULL,
    phase text DEFAULT 'done'::text NOT NULL,
    target integer,
    retired_count integer,
    retired_expression boolean,
    changed_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT layout_one CHECK (one),
    CONSTRAINT layout_phase_check CHECK ((phase = ANY (ARRAY['done'::text, 'build'::text, 'switch'::text, 'retire'::text])))
);

CREATE TABLE shardq.periodic (
    name text NOT NULL,
    cron text,
    every_s double precision,
    tz text NOT NULL,
    missed text NOT NULL,
    task text NOT NULL,
    queue text NOT NULL,
    priority integer NOT NULL,
    max_attempts integer NOT NULL,
    since timestamp with time zone NOT NULL,
    last_slot timestamp with time zone,
    removed_at timestamp with time zone,
    CONSTRAINT periodic_expression_check CHECK (((cron IS NULL) <> (every_s IS NULL))),
    CONSTRAINT periodic_missed_check CHECK ((missed = ANY (ARRAY['skip'::text, 'once'::text, 'all'::text])))
);

CREATE TABLE shardq.groups (
    queue text NOT NULL,
    name text NOT NULL,
    rate_tat timestamp with time zone
);

CREATE TABLE shardq.queues (
    name text NOT NULL,
    paused_at timestamp with time zone,
    max_running integer,
    max_running_per_group integer,
    rate_count integer,
    rate_period_s double precision,
    rate_burst integer,
    rate_tat timestamp with time zone,
    rate_per_group_count integer,
    rate_per_group_period_s double precision,
    rate_per_group_burst integer,
    paused_until timestamp with time zone,
    CONSTRAINT queues_max_running_check CHECK ((max_running >= 1)),
    CONSTRAINT queues_max_running_per_group_check CHECK ((max_running_per_group >= 1)),
    CONSTRAINT queues_rate_burst_check CHECK ((rate_burst >= 1)),
    CONSTRAINT queues_rate_count_check CHECK ((rate_count >= 1)),
    CONSTRAINT queues_rate_per_group_burst_check CHECK ((rate_per_group_burst >= 1)),
    CONSTRAINT queues_rate_per_group_count_check CHECK ((rate_per_group_count >= 1)),
    CONSTRAINT queues_rate_per_group_period_s_check CHECK ((rate_per_group_period_s > (0)::double precision)),
    CONSTRAINT queues_rate_period_s_check CHECK ((rate_period_s > (0)::double precision))
);

CREATE TABLE shardq.results (
    id uuid NOT NULL,
    queue text NOT NULL,
    value jsonb,
    error text,
    attempts integer NOT NULL,
    enqueued_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    flow_id uuid
);

CREATE TABLE shardq.sessions (
    id text NOT NULL,
    actor text NOT NULL,
    role text NOT NULL,
    credential text NOT NULL,
    csrf text NOT NULL,
    address text,
    created_at timestamp with time zone NOT NULL,
    seen_at timestamp with time zone NOT NULL,
    idle_s integer NOT NULL,
    expires_at timestamp with time zone NOT NULL
);

CREATE TABLE shardq.spark_ledger (
    id uuid NOT NULL,
    merged_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE shardq.steps (
    task_id uuid NOT NULL,
    name text NOT NULL,
    kind text NOT NULL,
    state text NOT NULL,
    value jsonb,
    until timestamp with time zone,
    at timestamp with time zone NOT NULL,
    CONSTRAINT steps_kind_check CHECK ((kind = ANY (ARRAY['step'::text, 'sleep'::text, 'event'::text, 'spawn'::text, 'wait'::text]))),
    CONSTRAINT steps_state_check CHECK ((state = ANY (ARRAY['done'::text, 'waiting'::text, 'timed_out'::text])))
);

CREATE TABLE shardq.throughput (
    queue text NOT NULL,
    period timestamp with time zone NOT NULL,
    slot smallint NOT NULL,
    enqueued bigint DEFAULT 0 NOT NULL,
    completed bigint DEFAULT 0 NOT NULL
);

CREATE TABLE shardq.tasks (
    bucket smallint GENERATED ALWAYS AS ({bucket_sql}) STORED NOT NULL,
    queue text NOT NULL,
    status text DEFAULT 'available'::text NOT NULL,
    exec_time timestamp with time zone DEFAULT now() NOT NULL,
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    payload jsonb NOT NULL,
    key text,
    priority integer DEFAULT 0 NOT NULL,
    pending_head_start_s integer DEFAULT 0 NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 10 NOT NULL,
    lease_token uuid,
    last_error text,
    enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
    first_claimed_at timestamp with time zone,
    last_claimed_at timestamp with time zone,
    times_claimed integer DEFAULT 0 NOT NULL,
    times_requeued integer DEFAULT 0 NOT NULL,
    last_requeued_at timestamp with time zone,
    task_group text,
    slot integer,
    group_slot integer,
    worker_id uuid,
    trace_context text,
    flow_id uuid,
    flow_next uuid[],
    flow_deps uuid[],
    waits integer,
    parked text,
    wait_event text,
    durable boolean,
    CONSTRAINT tasks_attempts_check CHECK (((attempts >= 0) AND (max_attempts >= 1))),
    CONSTRAINT tasks_head_start_check CHECK ((pending_head_start_s >= 0)),
    CONSTRAINT tasks_key_check CHECK (((key IS NULL) OR ((length(key) >= 1) AND (length(key) <= 512)))),
    CONSTRAINT tasks_parked_check CHECK ((parked = ANY (ARRAY['sleep'::text, 'event'::text, 'children'::text]))),
    CONSTRAINT tasks_queue_check CHECK (((octet_length(queue) BETWEEN 1 AND 128) AND ("left"(queue, 1) <> ALL (ARRAY['_'::text, '.'::text, ':'::text, '-'::text])) AND (ltrim(textsend(queue), '\x4142434445464748494a4b4c4d4e4f505152535455565758595a6162636465666768696a6b6c6d6e6f707172737475767778797a303132333435363738395f2e3a2d'::bytea) = '\x'::bytea))),
    CONSTRAINT tasks_status_check CHECK ((status = ANY (ARRAY['available'::text, 'locked'::text, 'dead'::text, 'waiting'::text]))),
    CONSTRAINT tasks_task_group_check CHECK (((task_group IS NULL) OR ((length(task_group) >= 1) AND (length(task_group) <= 256))))
)
WITH (fillfactor='90', autovacuum_analyze_scale_factor='0.02', autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='1000', autovacuum_vacuum_insert_scale_factor='0', autovacuum_vacuum_insert_threshold='1000', autovacuum_vacuum_cost_delay='0', vacuum_truncate='false');

CREATE TABLE shardq.workers (
    id uuid NOT NULL,
    name text NOT NULL,
    host text NOT NULL,
    pid integer NOT NULL,
    queues text[] NOT NULL,
    started_at timestamp with time zone NOT NULL,
    last_seen_at timestamp with time zone NOT NULL,
    generation bigint
);

ALTER TABLE ONLY shardq.attempts
    ADD CONSTRAINT attempts_pkey PRIMARY KEY (task_id, slot);

ALTER TABLE ONLY shardq.audit
    ADD CONSTRAINT audit_pkey PRIMARY KEY (id);

ALTER TABLE ONLY shardq.events
    ADD CONSTRAINT events_pkey PRIMARY KEY (name);

ALTER TABLE ONLY shardq.flow_events
    ADD CONSTRAINT flow_events_pkey PRIMARY KEY (flow_id, at, task_id, outcome);

ALTER TABLE ONLY shardq.flows
    ADD CONSTRAINT flows_pkey PRIMARY KEY (id);

ALTER TABLE ONLY shardq.layout
    ADD CONSTRAINT layout_pkey PRIMARY KEY (one);

ALTER TABLE ONLY shardq.periodic
    ADD CONSTRAINT periodic_pkey PRIMARY KEY (name);

ALTER TABLE ONLY shardq.groups
    ADD CONSTRAINT groups_pkey PRIMARY KEY (queue, name);

ALTER TABLE ONLY shardq.queues
    ADD CONSTRAINT queues_pkey PRIMARY KEY (name);

ALTER TABLE ONLY shardq.results
    ADD CONSTRAINT results_pkey PRIMARY KEY (id);

ALTER TABLE ONLY shardq.sessions
    ADD CONSTRAINT sessions_pkey PRIMARY KEY (id);

ALTER TABLE ONLY shardq.spark_ledger
    ADD CONSTRAINT spark_ledger_pkey PRIMARY KEY (id);

ALTER TABLE ONLY shardq.tasks
    ADD CONSTRAINT tasks_pkey PRIMARY KEY (bucket, queue, status, exec_time, id);

ALTER TABLE ONLY shardq.steps
    ADD CONSTRAINT steps_pkey PRIMARY KEY (task_id, name);

ALTER TABLE ONLY shardq.throughput
    ADD CONSTRAINT throughput_pkey PRIMARY KEY (queue, period, slot);

ALTER TABLE ONLY shardq.workers
    ADD CONSTRAINT workers_pkey PRIMARY KEY (id);

CREATE INDEX attempts_ended ON shardq.attempts USING btree (ended_at);

CREATE INDEX audit_at ON shardq.audit USING btree (at);

CREATE INDEX events_expiry ON shardq.events USING btree (expires_at);

CREATE INDEX flows_finished ON shardq.flows USING btree (finished_at) WHERE (finished_at IS NOT NULL);

CREATE INDEX results_expiry ON shardq.results USING btree (expires_at);

CREATE INDEX results_flows ON shardq.results USING btree (flow_id) WHERE (flow_id IS NOT NULL);

CREATE INDEX sessions_actor ON shardq.sessions USING btree (actor);

CREATE INDEX sessions_expiry ON shardq.sessions USING btree (expires_at);

CREATE UNIQUE INDEX tasks_ids ON shardq.tasks USING btree (id);

CREATE INDEX tasks_flows ON shardq.tasks USING btree (flow_id, status) WHERE (flow_id IS NOT NULL);

CREATE UNIQUE INDEX tasks_group_slots ON shardq.tasks USING btree (queue, task_group, group_slot) WHERE ((status = 'locked'::text) AND (group_slot IS NOT NULL));

CREATE INDEX tasks_groups_waiting ON shardq.tasks USING btree (queue, task_group, exec_time) WHERE ((status = 'available'::text) AND (task_group IS NOT NULL));

CREATE INDEX tasks_head_starts ON shardq.tasks USING btree (bucket, exec_time) WHERE (pending_head_start_s > 0);

CREATE INDEX tasks_leases ON shardq.tasks USING btree (bucket, exec_time, id) WHERE (status = 'locked'::text);

CREATE INDEX tasks_parked ON shardq.tasks USING btree (parked, wait_event) WHERE (parked IS NOT NULL);

CREATE UNIQUE INDEX tasks_running_keys ON shardq.tasks USING btree (queue, key) WHERE ((key IS NOT NULL) AND (status = 'locked'::text));

CREATE UNIQUE INDEX tasks_waiting_keys ON shardq.tasks USING btree (queue, key) WHERE ((key IS NOT NULL) AND (status = 'available'::text));

CREATE UNIQUE INDEX tasks_slots ON shardq.tasks USING btree (queue, slot) WHERE ((status = 'locked'::text) AND (slot IS NOT NULL));
