-- Every event says who may receive it (platform/outbox.ts, Audience): the JSON string "everyone" for
-- fleet-wide state, otherwise its owner. NULL no longer means "everyone": an event without an audience
-- reaches no tenant (operators only). New rows must declare one; rows written before this change keep
-- theirs as the subgraphs' migrations left them (NOT VALID: they are not checked here). Those whose
-- topic is fleet-wide are marked "everyone" by their subgraph's migration; any other stays withheld.
ALTER TABLE outbox ADD CONSTRAINT outbox_audience_declared CHECK (audience IS NOT NULL) NOT VALID;
