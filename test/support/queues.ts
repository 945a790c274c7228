/** A queue producer for a test's hand-made env: it keeps every body sent, by send or sendBatch, in `sent`. */
export function recordingQueue<Body>(sent: Body[] = []): Queue<Body> {
  return {
    send: async (body: Body) => {
      sent.push(body);
    },
    sendBatch: async (messages: Iterable<MessageSendRequest<Body>>) => {
      for (const { body } of messages) sent.push(body);
    },
  } as unknown as Queue<Body>;
}
