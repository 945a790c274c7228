/**
 * An app side that loses its store mid-run and rebuilds it from the event feed
 * (docs/api.md#event-feed), through the example's own catch-up (examples/app-feed.ts) and view
 * (examples/app-view.ts): after the drain its view must hold exactly the receipts the shards hold.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { catchUp, type FeedSource } from "../examples/app-feed.ts";
import { DEFAULT_FEED_SETTLE_SECONDS } from "../src/shared/config.ts";
import { AppView } from "../examples/app-view.ts";
import type { StoreSnapshot } from "./reconcile.ts";

/** How often a catch-up is tried while faults (D1 failures, restarts) refuse it, and how far apart. */
const ATTEMPTS = 30;
const PAUSE_MS = 1000;

/** What the rebuild read, and where its view and the shards disagree. */
export interface RebuildResult {
  /** Events read from the feed, over every catch-up. */
  events: number;
  /** Receipts the rebuilt view holds. */
  receipts: number;
  /** "app user: receipt" pairs the shards hold and the view does not, and the other way round. */
  missing: string[];
  extra: string[];
}

/** The rebuilding app side; `rebuild` drops its store, `settle` reads the rest once the drain is done. */
export class RebuildingAppSide {
  private view = new AppView();
  private events = 0;
  private readonly directory = mkdtempSync(path.join(tmpdir(), "receipts-soak-feed-"));
  private readonly source: FeedSource;
  private readonly appUsers = new Set<string>();

  constructor(credentials: { baseUrl: string; clientId: string; clientSecret: string }) {
    this.source = { ...credentials, cursorFile: path.join(this.directory, "cursor") };
  }

  /** The store is lost: a fresh view, no cursor, everything read again from the feed's start. */
  async rebuild(): Promise<void> {
    this.view = new AppView();
    rmSync(this.source.cursorFile, { force: true });
    await this.catchUp();
  }

  /**
   * After the drain: the rest of the feed into the same view, from the cursor the rebuild kept,
   * once the feed's hold-back has passed the drain's last event. Following `next` alone must see
   * every event, however late its commit landed (docs/api.md#event-feed, "The tail").
   */
  async settle(store: StoreSnapshot): Promise<RebuildResult> {
    await sleep(DEFAULT_FEED_SETTLE_SECONDS * 1000 + PAUSE_MS);
    await this.catchUp();
    rmSync(this.directory, { recursive: true, force: true });
    const held = new Set(store.receipts.map((receipt) => `${receipt.app_user_id}: ${receipt.receipt_id}`));
    for (const receipt of store.receipts) this.appUsers.add(receipt.app_user_id);
    const rebuilt = new Set(
      [...this.appUsers].flatMap((appUserId) => this.view.receiptsOf(appUserId).map((receipt) => `${appUserId}: ${receipt.receipt_id}`)),
    );
    return {
      events: this.events,
      receipts: rebuilt.size,
      missing: [...held].filter((pair) => !rebuilt.has(pair)),
      extra: [...rebuilt].filter((pair) => !held.has(pair)),
    };
  }

  // The soak's faults refuse some reads (a 500, a restart): the cursor file keeps what was read.
  private async catchUp(): Promise<void> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        await catchUp(this.source, (event) => {
          if (typeof event.app_user_id === "string") this.appUsers.add(event.app_user_id);
          this.view.receive(event.event_id, event);
          this.events += 1;
        });
        return;
      } catch (error) {
        if (attempt >= ATTEMPTS) throw error;
        await sleep(PAUSE_MS);
      }
    }
  }
}
