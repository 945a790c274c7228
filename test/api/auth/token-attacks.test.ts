/**
 * The tokens an attacker can forge, replay, stretch or bend, sent to every token-bearing
 * route (add and delete). Each must be refused with 403 and leave every row of D1 as it was: no
 * receipt added or deleted, no notice recorded.
 */
import { env } from "cloudflare:workers";
import { base64url, exportJWK, exportSPKI, generateKeyPair } from "jose";
import { describe, expect, it } from "vitest";
import {
  call,
  expectRefused,
  issueClient,
  loginToken,
  newCaller,
  postAdd,
  signTestToken,
  updateClient,
  uniqueId,
  type Answer,
} from "../../support/api.ts";
import { TEST_TOKEN_KEYS } from "../../support/keys.ts";
import { deleteHeadersFor, seedReceipt } from "../../support/notices.ts";
import { PATHS } from "../../../src/shared/paths.ts";

/** A token-bearing route, ready to be called by one fresh client with any Authorization value. */
interface Target {
  route: string;
  prepare(): Promise<Prepared>;
}

interface Prepared {
  clientId: string;
  /** A valid token of that client, for tampering. */
  token: string;
  send(authorization: string): Promise<Answer>;
}

const TARGETS: Target[] = [
  {
    route: "add",
    async prepare() {
      const { client, headers } = await newCaller();
      return {
        clientId: client.clientId,
        token: headers.Authorization!.slice("Bearer ".length),
        send: (authorization) => postAdd({ ...headers, Authorization: authorization }),
      };
    },
  },
  {
    route: "delete",
    async prepare() {
      const { client, headers } = await newCaller();
      const token = headers.Authorization!.slice("Bearer ".length);
      const receipt = await seedReceipt(client);
      return {
        clientId: client.clientId,
        token,
        send: (authorization) => call(PATHS.delete, { headers: { ...deleteHeadersFor(token, receipt), Authorization: authorization } }),
      };
    },
  },
];

/** One forged or bent credential; `make` returns the whole Authorization value. */
interface Attack {
  name: string;
  make(target: Prepared): Promise<string>;
  /** The remedy the message must name, where it differs from the generic refusal. */
  says?: string;
}

const now = () => Math.floor(Date.now() / 1000);
const bearer = (token: string) => `Bearer ${token}`;
const encode = (value: unknown) => base64url.encode(JSON.stringify(value));
const [headerPart, payloadPart, signaturePart] = [0, 1, 2];

function parts(token: string): string[] {
  return token.split(".");
}

function decodePart(token: string, index: number): Record<string, unknown> {
  return JSON.parse(new TextDecoder().decode(base64url.decode(parts(token)[index]!)));
}

/** The token with one part re-encoded and every other part, the signature included, kept. */
function tamper(token: string, index: number, change: (part: Record<string, unknown>) => void): string {
  const part = decodePart(token, index);
  change(part);
  const all = parts(token);
  all[index] = encode(part);
  return all.join(".");
}

/** The subject a forged token needs to pass every check but the one under attack. */
const claimsOf = (target: Prepared) => ({ sub: target.clientId });

// The attacker's own key pairs, made once: an RSA key takes a while to generate.
const attackerRsa = generateKeyPair("RS256", { extractable: true });
const attackerEc = generateKeyPair("ES256", { extractable: true });

const signingKid = TEST_TOKEN_KEYS.keys[0]!.kid;

const ATTACKS: Record<string, Attack[]> = {
  "algorithm confusion": [
    {
      name: "alg none, no signature, under the signing kid",
      make: async (t) => bearer(`${encode({ alg: "none", kid: signingKid, typ: "JWT" })}.${parts(t.token)[payloadPart]}.`),
    },
    ...["none", "None", "NONE"].map((alg) => ({
      name: `alg ${alg} in the header of a real token, its signature kept`,
      make: async (t: Prepared) => bearer(tamper(t.token, headerPart, (h) => (h.alg = alg))),
    })),
    {
      name: "RS256 signed with the attacker's RSA key under the signing kid",
      make: async (t) => bearer(await signTestToken(claimsOf(t), { alg: "RS256" }, (await attackerRsa).privateKey)),
    },
    {
      name: "ES256 signed with the attacker's P-256 key under the signing kid",
      make: async (t) => bearer(await signTestToken(claimsOf(t), { alg: "ES256" }, (await attackerEc).privateKey)),
    },
    {
      name: "RS256 carrying the attacker's public key as an embedded jwk",
      make: async (t) => {
        const { publicKey, privateKey } = await attackerRsa;
        return bearer(await signTestToken(claimsOf(t), { alg: "RS256", jwk: await exportJWK(publicKey) }, privateKey));
      },
    },
    {
      name: "ES256 pointing at the attacker's key set through jku and x5u",
      make: async (t) => {
        const header = { alg: "ES256", jku: "https://attacker.example/jwks.json", x5u: "https://attacker.example/cert.pem" };
        return bearer(await signTestToken(claimsOf(t), header, (await attackerEc).privateKey));
      },
    },
    {
      name: "HS256 whose HMAC key is the attacker's RSA public key (PEM)",
      make: async (t) => {
        const pem = await exportSPKI((await attackerRsa).publicKey);
        return bearer(await signTestToken(claimsOf(t), {}, new TextEncoder().encode(pem)));
      },
    },
    {
      name: "HS256 whose HMAC key is the attacker's RSA public key (JWK JSON)",
      make: async (t) => {
        const jwk = JSON.stringify(await exportJWK((await attackerRsa).publicKey));
        return bearer(await signTestToken(claimsOf(t), {}, new TextEncoder().encode(jwk)));
      },
    },
    {
      name: "RS256 in the header, the signature an HMAC with the service's own key",
      make: async (t) => bearer(await hmacUnderHeader(t, { alg: "RS256" })),
    },
    ...["HS384", "HS512"].map((alg) => ({
      name: `${alg} with the service's own key bytes`,
      make: async (t: Prepared) => bearer(await signTestToken(claimsOf(t), { alg }, base64url.decode(TEST_TOKEN_KEYS.keys[0]!.k))),
    })),
  ],
  "signature and key": [
    {
      name: "HS256 signed with a wrong key under the signing kid",
      make: async (t) => bearer(await signTestToken(claimsOf(t), {}, crypto.getRandomValues(new Uint8Array(32)))),
    },
    {
      name: "signed with the second key but naming the first key's kid",
      make: async (t) => bearer(await signTestToken(claimsOf(t), { kid: signingKid }, 1)),
    },
    {
      name: "the signature stripped",
      make: async (t) => bearer(parts(t.token).slice(0, 2).join(".") + "."),
    },
    {
      name: "the signature of another valid token",
      make: async (t) => {
        const other = await signTestToken({ ...claimsOf(t), jti: crypto.randomUUID() });
        return bearer([...parts(t.token).slice(0, 2), parts(other)[signaturePart]].join("."));
      },
    },
    {
      name: "one bit of the signature flipped",
      make: async (t) => {
        const all = parts(t.token);
        const bytes = base64url.decode(all[signaturePart]!);
        bytes[0]! ^= 1;
        all[signaturePart] = base64url.encode(bytes);
        return bearer(all.join("."));
      },
    },
  ],
  "unknown or missing kid": [
    { name: "an unknown kid", make: async (t) => bearer(await signTestToken(claimsOf(t), { kid: "k-unknown" })) },
    { name: "no kid at all", make: async (t) => bearer(await signTestToken(claimsOf(t), { kid: undefined })) },
    { name: "an empty kid", make: async (t) => bearer(await signTestToken(claimsOf(t), { kid: "" })) },
    ...[["a number", 1], ["a list holding the signing kid", [signingKid]], ["an object holding it", { kid: signingKid }]].map(
      ([label, kid]) => ({
        name: `the kid as ${label}`,
        make: async (t: Prepared) => bearer(await signTestToken(claimsOf(t), { kid })),
      }),
    ),
    ...["../../../../dev/null", `' OR '1'='1`, `${signingKid}\u0000`].map((kid) => ({
      name: `the kid ${JSON.stringify(kid)}`,
      make: async (t: Prepared) => bearer(await signTestToken(claimsOf(t), { kid })),
    })),
    {
      name: "the kid differing from the signing kid in case only",
      make: async (t) => bearer(await signTestToken(claimsOf(t), { kid: signingKid.toUpperCase() })),
    },
  ],
  "tampered token": [
    {
      name: "payload: sub changed to another client",
      make: async (t) => {
        const other = await issueClient();
        return bearer(tamper(t.token, payloadPart, (p) => (p.sub = other.clientId)));
      },
    },
    { name: "payload: exp moved a day on", make: async (t) => bearer(tamper(t.token, payloadPart, (p) => (p.exp = now() + 86_400))) },
    { name: "payload: scope widened", make: async (t) => bearer(tamper(t.token, payloadPart, (p) => (p.scope = "service.pos service.admin"))) },
    { name: "payload: a claim added", make: async (t) => bearer(tamper(t.token, payloadPart, (p) => (p.admin = true))) },
    { name: "header: typ changed", make: async (t) => bearer(tamper(t.token, headerPart, (h) => (h.typ = "at+jwt"))) },
    {
      name: "header: an unknown critical extension",
      make: async (t) => bearer(await hmacUnderHeader(t, { alg: "HS256", crit: ["x-attack"], "x-attack": true })),
    },
    {
      name: "header: an unencoded payload (b64 false)",
      make: async (t) => bearer(await hmacUnderHeader(t, { alg: "HS256", crit: ["b64"], b64: false })),
    },
  ],
  "issuer and audience": [
    { name: "a wrong issuer", make: async (t) => bearer(await signTestToken({ ...claimsOf(t), iss: "https://attacker.example" })) },
    { name: "the issuer with a trailing slash", make: async (t) => bearer(await signTestToken({ ...claimsOf(t), iss: `${env.TOKEN_ISSUER}/` })) },
    { name: "no issuer", make: async (t) => bearer(await signTestToken({ ...claimsOf(t), iss: undefined })) },
    { name: "a wrong audience", make: async (t) => bearer(await signTestToken({ ...claimsOf(t), aud: "receipts.v1" })) },
    { name: "an audience list without this service", make: async (t) => bearer(await signTestToken({ ...claimsOf(t), aud: ["a", "b"] })) },
    { name: "no audience", make: async (t) => bearer(await signTestToken({ ...claimsOf(t), aud: undefined })) },
  ],
  "expiry and clock skew": [
    {
      name: "expired an hour ago",
      make: async (t) => bearer(await signTestToken({ ...claimsOf(t), iat: now() - 7200, exp: now() - 3600 })),
      says: "fresh token",
    },
    {
      name: "expired just beyond the 30 s skew",
      make: async (t) => bearer(await signTestToken({ ...claimsOf(t), iat: now() - 3640, exp: now() - 40 })),
      says: "fresh token",
    },
    { name: "no exp", make: async (t) => bearer(await signTestToken({ ...claimsOf(t), exp: undefined })) },
    { name: "exp as a string", make: async (t) => bearer(await signTestToken({ ...claimsOf(t), exp: String(now() + 3600) })) },
    { name: "a fractional exp", make: async (t) => bearer(await signTestToken({ ...claimsOf(t), exp: now() + 3599.5 })) },
    { name: "a fractional iat", make: async (t) => bearer(await signTestToken({ ...claimsOf(t), iat: now() - 0.5 })) },
    { name: "nbf beyond the skew", make: async (t) => bearer(await signTestToken({ ...claimsOf(t), nbf: now() + 60 })) },
    { name: "iat beyond the skew", make: async (t) => bearer(await signTestToken({ ...claimsOf(t), iat: now() + 60, exp: now() + 3660 })) },
    { name: "iat an hour ahead", make: async (t) => bearer(await signTestToken({ ...claimsOf(t), iat: now() + 3600, exp: now() + 7200 })) },
    { name: "no iat", make: async (t) => bearer(await signTestToken({ ...claimsOf(t), iat: undefined })) },
    { name: "no jti", make: async (t) => bearer(await signTestToken({ ...claimsOf(t), jti: undefined })) },
  ],
  "client binding": [
    {
      name: "a live token of a client disabled since",
      make: async (t) => {
        await updateClient(t.clientId, { disabled: true });
        return bearer(t.token);
      },
    },
    {
      name: "a live token of another client",
      make: async () => bearer(await loginToken(await issueClient())),
    },
    {
      name: "sub differing from client_id in case only",
      make: async (t) => bearer(await signTestToken({ sub: t.clientId.toUpperCase() })),
    },
    { name: "no sub", make: async () => bearer(await signTestToken({})) },
    { name: "sub as a number", make: async () => bearer(await signTestToken({ sub: 42 })) },
    { name: "sub naming a client that does not exist", make: async () => bearer(await signTestToken({ sub: uniqueId("nobody") })) },
  ],
  scope: [
    { name: "another scope", make: async (t) => bearer(await signTestToken({ ...claimsOf(t), scope: "service.admin" })) },
    { name: "the scope in upper case", make: async (t) => bearer(await signTestToken({ ...claimsOf(t), scope: "SERVICE.POS" })) },
    { name: "the scope among others", make: async (t) => bearer(await signTestToken({ ...claimsOf(t), scope: "service.pos service.admin" })) },
    { name: "the scope as a list", make: async (t) => bearer(await signTestToken({ ...claimsOf(t), scope: ["service.pos"] })) },
    { name: "an empty scope", make: async (t) => bearer(await signTestToken({ ...claimsOf(t), scope: "" })) },
    { name: "no scope", make: async (t) => bearer(await signTestToken({ ...claimsOf(t), scope: undefined })) },
  ],
  "garbage tokens": [
    { name: "a word", make: async () => bearer("garbage") },
    { name: "three dots of nothing", make: async () => bearer("..") },
    { name: "empty JSON parts", make: async () => bearer("e30.e30.e30") },
    { name: "a header that is a JSON array", make: async (t) => bearer(`${encode([])}.${parts(t.token)[payloadPart]}.x`) },
    { name: "a header that is not JSON", make: async (t) => bearer(`${base64url.encode("{alg")}.${parts(t.token)[payloadPart]}.x`) },
    { name: "characters outside base64url", make: async () => bearer("eyJhbGciOiJIUzI1NiJ9!.e30$.x*") },
    { name: "four parts", make: async (t) => bearer(`${t.token}.${parts(t.token)[signaturePart]}`) },
    { name: "a JWE-shaped token of five parts", make: async () => bearer("eyJhbGciOiJkaXIiLCJlbmMiOiJBMjU2R0NNIn0..aaaa.bbbb.cccc") },
    { name: "an empty token (Bearer and a space)", make: async () => "Bearer " },
    { name: "10 KB of random base64url", make: async () => bearer(base64url.encode(crypto.getRandomValues(new Uint8Array(7680)))) },
    {
      name: "10 KB in the shape of a JWT",
      make: async (t) => bearer(`${parts(t.token)[headerPart]}.${"A".repeat(10_240)}.${parts(t.token)[signaturePart]}`),
    },
  ],
  "Authorization without the Bearer scheme": [
    { name: "Basic credentials", make: async () => "Basic dXNlcjpwYXNz" },
    { name: "a bare token", make: async (t) => t.token },
    { name: "Bearer alone", make: async () => "Bearer" },
    { name: "another scheme word", make: async (t) => `Token ${t.token}` },
    { name: "Bearer with a colon", make: async (t) => `Bearer:${t.token}` },
    { name: "the scheme after the token", make: async (t) => `${t.token} Bearer` },
    { name: "something after the token", make: async (t) => `Bearer ${t.token} extra` },
    { name: "two Bearer credentials in one header", make: async (t) => `Bearer ${t.token}, Bearer ${t.token}` },
  ],
};

// Signs the real payload with the service's key under an arbitrary header, which jose refuses to
// produce for headers it knows to be wrong.
async function hmacUnderHeader(target: Prepared, header: Record<string, unknown>): Promise<string> {
  const key = await crypto.subtle.importKey("raw", base64url.decode(TEST_TOKEN_KEYS.keys[0]!.k), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const input = `${encode({ kid: signingKid, typ: "JWT", ...header })}.${parts(target.token)[payloadPart]}`;
  const signature = await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(input));
  return `${input}.${base64url.encode(new Uint8Array(signature))}`;
}

for (const target of TARGETS) {
  for (const [threat, attacks] of Object.entries(ATTACKS)) {
    describe(`token attacks: ${threat} (${target.route})`, () => {
      it.each(attacks)("$name: 403, nothing changed", async (attack) => {
        const prepared = await target.prepare();
        const authorization = await attack.make(prepared);
        const message = await expectRefused(() => prepared.send(authorization), 403, "Forbidden");
        expect(message).toMatch(/Header (Authorization|client_id)/);
        if (attack.says) expect(message).toContain(attack.says);
      });
    });
  }

  describe(`token attacks: the bounds are exact (${target.route})`, () => {
    // Controls for the refusals above: the skew admits a little and no more, and the scheme word
    // is read case-insensitively as RFC 6750 says; without these the 403s could be for any reason.
    it.each<[string, (t: Prepared) => Promise<string>]>([
      ["a token login issued", async (t) => bearer(t.token)],
      ["the scheme word in lower case", async (t) => `bearer ${t.token}`],
      ["expired 20 s ago, within the skew", async (t) => bearer(await signTestToken({ ...claimsOf(t), iat: now() - 3620, exp: now() - 20 }))],
      ["nbf 20 s ahead, within the skew", async (t) => bearer(await signTestToken({ ...claimsOf(t), nbf: now() + 20 }))],
      ["iat 20 s ahead, within the skew", async (t) => bearer(await signTestToken({ ...claimsOf(t), iat: now() + 20, exp: now() + 3620 }))],
      ["signed by the second (rotated-in) key under its own kid", async (t) => bearer(await signTestToken(claimsOf(t), {}, 1))],
    ])("%s: 200", async (_label, make) => {
      const prepared = await target.prepare();
      const answer = await prepared.send(await make(prepared));
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    });
  });
}
