import { fill, h } from '../dom.js';
import type { Connection, ConnectionState } from '../connection.js';
import { storeKey, storedKey } from '../credential.js';

/**
 * The connection's state, always visible: a pill in the header and, whenever the page is not live, a
 * banner saying what it shows is not current and when it tries again. `body[data-connection]` carries
 * the state for styling (and for the end-to-end test). A 4401 close opens the API key form.
 */
export function connectionStatus(
  connection: Connection,
  elements: { pill: HTMLElement; banner: HTMLElement; form: HTMLFormElement; forget: HTMLButtonElement },
): void {
  const { pill, banner, form, forget } = elements;
  const input = form.querySelector('input');
  let countdown: ReturnType<typeof setInterval> | null = null;

  const show = (state: ConnectionState) => {
    document.body.dataset['connection'] = state.kind;
    if (countdown) clearInterval(countdown);
    countdown = null;
    form.hidden = state.kind !== 'unauthorized';
    forget.hidden = storedKey() === null;
    switch (state.kind) {
      case 'live':
        // Over SSE when no WebSocket could be opened (a proxy that blocks them): the same streams, over HTTP.
        document.body.dataset['transport'] = state.via;
        fill(pill, state.via === 'sse' ? 'Live (HTTP)' : 'Live');
        pill.title = state.via === 'sse' ? 'WebSockets are blocked on the way to the gateway: streaming over Server-Sent Events' : '';
        banner.hidden = true;
        break;
      case 'connecting':
        fill(pill, 'Connecting…');
        banner.hidden = state.attempt <= 1;
        fill(banner, 'Connecting to the gateway…');
        break;
      case 'reconnecting': {
        fill(pill, 'Disconnected');
        banner.hidden = false;
        const tick = () => {
          const seconds = Math.max(0, Math.ceil((state.retryAt - Date.now()) / 1000));
          fill(
            banner,
            h('strong', {}, 'Disconnected'),
            ` (${state.reason}). Showing the state as of the last event; reconnecting ${seconds > 0 ? `in ${seconds} s` : 'now'} (attempt ${state.attempt}) and resuming every stream from its last cursor.`,
          );
        };
        tick();
        countdown = setInterval(tick, 500);
        break;
      }
      case 'unauthorized':
        fill(pill, 'Key needed');
        banner.hidden = false;
        fill(banner, h('strong', {}, 'Not connected: '), `${state.reason}. Enter an API key below.`);
        input?.focus();
        break;
    }
  };
  connection.onState(show);

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const key = input?.value.trim() ?? '';
    if (key === '') return;
    storeKey(key);
    if (input) input.value = '';
    connection.reconnect();
  });
  forget.addEventListener('click', () => {
    storeKey(null);
    connection.reconnect();
  });
}
