-- The sweep of stranded commands (src/commands/execute.ts, abandonStranded) reads the
-- pending commands every few minutes: few rows among millions, so a partial index.
CREATE INDEX "commands_pending_idx" ON "commands" USING btree ("id") WHERE "commands"."state" = 'pending';