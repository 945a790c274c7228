/**
 * The Web Crypto key type under its global name, which Node has at runtime but @types/node gives
 * only as a value: the example tests run the notifier's own signing code (src/notifier/push.ts,
 * written against the Workers types) on Node.
 */
type CryptoKey = import("node:crypto").webcrypto.CryptoKey;
