// The app push service as the cross-worker tests see it: the notifier's outbound fetches come
// here (miniflare outboundService), and each push is recorded in the PUSH_LOG KV namespace, which
// the tests read through their own binding. A test makes it refuse the pushes of one receipt by
// putting the status to answer under `respond:<receipt_id>`. An event about no receipt
// (app_user.erased) is filed under its event_id instead.
export default {
  /** @param {Request} request @param {{ PUSH_LOG: KVNamespace }} env */
  async fetch(request, env) {
    const body = await request.text();
    const event = JSON.parse(body);
    const receiptId = event.receipt_id ?? event.event_id;
    const status = Number((await env.PUSH_LOG.get(`respond:${receiptId}`)) ?? 200);
    const push = {
      url: request.url,
      status,
      headers: Object.fromEntries(request.headers),
      body,
    };
    await env.PUSH_LOG.put(`push:${receiptId}:${Date.now()}:${crypto.randomUUID()}`, JSON.stringify(push));
    return new Response(null, { status });
  },
};
