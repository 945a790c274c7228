/**
 * The signing keys the test Workers run with. Fixed, so a test can sign a token of its own
 * (expired, wrong audience, ...) with the very key the Worker trusts.
 */
export const TEST_TOKEN_KEYS = {
  keys: [
    { kty: "oct", kid: "test-2026-11", alg: "HS256", k: "dGVzdC1rZXktb25lLXRoaXJ0eS10d28tYnl0ZXMtbG9uZy0w" },
    { kty: "oct", kid: "test-2026-10", alg: "HS256", k: "dGVzdC1rZXktdHdvLXRoaXJ0eS10d28tYnl0ZXMtbG9uZy0w" },
  ],
};

/**
 * The Standard Webhooks secret the test notifier signs with (`whsec_` + base64 of 32 bytes), so
 * that a test verifies each push as the app side would.
 */
export const TEST_PUSH_SECRET = "whsec_dGVzdC1wdXNoLXNlY3JldC0zMi1ieXRlcy1sb25nISE=";

/** The AUDIT_HASH_KEY the test Workers run with, so a test can compute an app user's pseudonym. */
export const TEST_AUDIT_HASH_KEY = "dGVzdC1hdWRpdC1oYXNoLWtleS10aGlydHktdHdvLWJ5dGVzLWxvbmc";
