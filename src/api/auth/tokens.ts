/**
 * Access tokens (docs/api.md#login): HS256 JWTs signed with the first key of `TOKEN_KEYS` and verified
 * with any of them, so a key can be rotated without cutting live tokens. Kept alone so that a
 * reviewer can audit it alone.
 */
import { SignJWT, base64url, decodeProtectedHeader, errors, jwtVerify } from "jose";
import type { TokenKey } from "../../shared/token-keys.ts";
import type { ApiConfig } from "../../shared/config.ts";

/** docs/api.md#login: tokens live one hour. */
export const TOKEN_LIFETIME_SECONDS = 3600;

/** Clocks of two Workers may differ a little; a token from further ahead is refused. */
const CLOCK_SKEW_SECONDS = 30;

const ALGORITHM = "HS256";

/** The claims this service puts in, and requires of, every token. */
export interface AccessClaims {
  sub: string;
  scope: string;
  iat: number;
  exp: number;
  jti: string;
  /**
   * The client record's `tokens_valid_after` at login, in milliseconds since 1970 (0 when the
   * record had none). Absent from tokens issued before revocation existed. A record that has since moved
   * past it revokes the token.
   */
  epoch?: number;
}

export type TokenCheck =
  | { ok: true; claims: AccessClaims }
  | { ok: false; reason: "expired" | "invalid"; cause: string };

/** Signs a token for a client under the record's revocation `epoch`; `now` (seconds) is for tests. */
export async function issueAccessToken(
  config: ApiConfig,
  clientId: string,
  scope: string,
  epoch: number,
  now = Math.floor(Date.now() / 1000),
): Promise<string> {
  const signer = config.tokenKeys[0]!;
  return new SignJWT({ scope, epoch })
    .setProtectedHeader({ alg: ALGORITHM, kid: signer.kid, typ: "JWT" })
    .setSubject(clientId)
    .setIssuer(config.issuer)
    .setAudience(config.audience)
    .setIssuedAt(now)
    .setExpirationTime(now + TOKEN_LIFETIME_SECONDS)
    .setJti(crypto.randomUUID())
    .sign(await cryptoKey(signer));
}

/**
 * Verifies a token: HS256 only, a `kid` among the configured keys, this service's issuer and
 * audience, all claims present, not issued in the future, living no longer than login grants.
 * Expiry is told apart from every other fault because the client's remedy differs (log in again).
 */
export async function verifyAccessToken(config: ApiConfig, token: string): Promise<TokenCheck> {
  let kid: unknown;
  let alg: unknown;
  try {
    ({ kid, alg } = decodeProtectedHeader(token));
  } catch {
    return { ok: false, reason: "invalid", cause: "token header unreadable" };
  }
  // The header is the caller's text: the log says which rule failed, never what was sent.
  if (alg !== ALGORITHM) return { ok: false, reason: "invalid", cause: `algorithm other than ${ALGORITHM}` };
  const key = config.tokenKeys.find((candidate) => candidate.kid === kid);
  if (!key) return { ok: false, reason: "invalid", cause: "unknown kid" };
  try {
    const { payload } = await jwtVerify(token, await cryptoKey(key), {
      algorithms: [ALGORITHM],
      issuer: config.issuer,
      audience: config.audience,
      requiredClaims: ["sub", "scope", "iat", "exp", "jti"],
      clockTolerance: CLOCK_SKEW_SECONDS,
    });
    const claims = payload as unknown as AccessClaims;
    if (
      typeof claims.scope !== "string" ||
      typeof claims.sub !== "string" ||
      (claims.epoch !== undefined && typeof claims.epoch !== "number") ||
      // jose takes any number; this service issues whole seconds only, so a fraction is a token it never signed.
      !Number.isInteger(claims.iat) ||
      !Number.isInteger(claims.exp)
    ) {
      return { ok: false, reason: "invalid", cause: "claim types" };
    }
    if (claims.iat > Math.floor(Date.now() / 1000) + CLOCK_SKEW_SECONDS) {
      return { ok: false, reason: "invalid", cause: "issued in the future" };
    }
    // Only a holder of a signing key can mint a longer token, but nothing this service issued
    // lives longer, so such a token is a leaked key at work or a bug, never a client.
    if (claims.exp - claims.iat > TOKEN_LIFETIME_SECONDS + CLOCK_SKEW_SECONDS) {
      return { ok: false, reason: "invalid", cause: "lifetime over an hour" };
    }
    return { ok: true, claims };
  } catch (error) {
    if (error instanceof errors.JWTExpired) return { ok: false, reason: "expired", cause: "expired" };
    return { ok: false, reason: "invalid", cause: (error as { code?: string }).code ?? "verify failed" };
  }
}

// Importing a key costs more than an HMAC, so each key is imported once per isolate.
const importedKeys = new Map<string, Promise<CryptoKey>>();

function cryptoKey({ kid, k }: TokenKey): Promise<CryptoKey> {
  const cacheKey = `${kid}:${k}`;
  let imported = importedKeys.get(cacheKey);
  if (!imported) {
    imported = crypto.subtle.importKey("raw", base64url.decode(k), { name: "HMAC", hash: "SHA-256" }, false, [
      "sign",
      "verify",
    ]);
    importedKeys.set(cacheKey, imported);
  }
  return imported;
}
