/**
 * Fuzzing of login: random header sets, values and bodies. Beyond the documented shape,
 * a model says what each request must get, login writes nothing to D1, and the failed-login limit
 * holds: never more than 5 refused credentials per client_id in one window of the limiter, and
 * the right secret is never refused for others' failures.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { call, issueClient, rowCounts, uniqueId, type TestClient } from "../support/api.ts";
import { asReceived, headerSet, headerValue, strayBody, times, usableHeader } from "./arbitraries.ts";
import { CAMPAIGN_TIMEOUT_MS, runCampaign, type FuzzRequest } from "./harness.ts";
import { PATHS } from "../../src/shared/paths.ts";

// The limiter's window (wrangler.jsonc LOGIN_LIMITER: 5 a minute), aligned to the clock as the
// local limiter aligns it.
const WINDOW_MS = 60_000;
const LIMIT = 5;

describe("fuzzing: login", () => {
  it(
    "no 5xx, the error shape, the model's status, nothing written, the limit held",
    async () => {
      const client = await issueClient();
      const disabled = await issueClient({ disabled: true });
      const baseline = await rowCounts();
      const issued: string[] = [];
      const refusals = new Map<string, number>();

      const requests: fc.Arbitrary<FuzzRequest> = fc
        .tuple(
          headerSet({
            // The right values repeat, so that a fair share of requests gets as far as a token.
            client_id: headerValue([...times(client.clientId, 2), disabled.clientId, uniqueId("pos-nobody")]),
            client_secret: headerValue([...times(client.secret, 2), disabled.secret, "guess"]),
            token_type: headerValue([...times("Bearer", 3), "bearer", "MAC"]),
            scope: headerValue([...times("service.pos", 3), "service.admin"]),
          }),
          strayBody,
        )
        .map(([headers, body]) => ({ headers, body }));

      // The limiter's window the last request fell in, or undefined when it straddled two.
      let window: number | undefined;
      await runCampaign(
        "login",
        requests,
        async ({ headers, body }) => {
          const started = Math.floor(Date.now() / WINDOW_MS);
          const answer = await call(PATHS.login, { headers, body });
          window = Math.floor(Date.now() / WINDOW_MS) === started ? started : undefined;
          return answer;
        },
        async ({ headers }, { answer }) => {
          const expected = expectedLogin(headers, client, disabled);
          if (!expected.includes(answer.status)) throw new Error(`expected ${expected.join(" or ")}, got ${answer.status}`);
          if (answer.status === 200) issued.push(answer.body.data.access_token);
          if (answer.status === 403 && expected.includes(429) && window !== undefined) {
            const key = `${asReceived(headers, "client_id")}@${window}`;
            const count = (refusals.get(key) ?? 0) + 1;
            refusals.set(key, count);
            if (count > LIMIT) throw new Error(`refusal ${count} of ${key} within one window, not 429`);
          }
          expect(await rowCounts()).toEqual(baseline);
        },
        () => [client.secret, disabled.secret, ...issued.slice(-3)],
      );
    },
    CAMPAIGN_TIMEOUT_MS,
  );
});

/** docs/api.md#common-rules and #login: the statuses login may give these headers, as the Worker receives them. */
function expectedLogin(sent: Record<string, string>, client: TestClient, disabled: TestClient): number[] {
  const names = ["client_id", "client_secret", "token_type", "scope"];
  const values = Object.fromEntries(names.map((name) => [name, asReceived(sent, name)]));
  if (names.some((name) => values[name] === null)) return [400];
  if (names.some((name) => !usableHeader(name, values[name]!))) return [406];
  if (values.token_type !== "Bearer" || values.scope !== "service.pos") return [403];
  // The right secret of the enabled client logs in, however many failures its client_id has had;
  // the right secret of the disabled one is refused, and not counted as a failed guess.
  const right = (holder: TestClient) => values.client_id === holder.clientId && values.client_secret === holder.secret;
  if (right(client)) return [200];
  if (right(disabled)) return [403];
  // Every other pair fails on the credentials: 403, or 429 once its client_id is limited.
  return [403, 429];
}
