import {
  gpuShareText,
  sessionCountdown,
  sessionStatusText,
  WARNING_MINUTES
} from '../countdown';
import { zoneName } from '../../common/format';
import {
  makeServerSession as session,
  MINUTE
} from '../../__tests__/session.fixture';

const now = new Date('2024-05-06T10:00:00.000Z');
const inMinutes = (minutes: number) =>
  new Date(now.getTime() + minutes * MINUTE).toISOString();

describe('the GPU share in the status bar', () => {
  it('names the share of the server', () => {
    expect(gpuShareText(session())).toBe('GPU: 1/4 of an RTX 4090, 6 GiB');
  });

  it('says "No GPU" for a server without one', () => {
    expect(gpuShareText(session({ gpu_share: null }))).toBe('No GPU');
    expect(gpuShareText(session({ gpu_share: '  ' }))).toBe('No GPU');
    // As the spawner writes it for a CPU-only profile
    expect(gpuShareText(session({ gpu_share: 'No GPU' }))).toBe('No GPU');
  });
});

describe('sessionCountdown, the time left in the class', () => {
  it('reads end times as the spawner writes them (Python isoformat)', () => {
    const classEnd = new Date(now.getTime() + 42 * MINUTE)
      .toISOString()
      .replace('.000Z', '+00:00');
    expect(sessionCountdown(session({ class_end: classEnd }), now)?.text).toBe(
      'class ends in 42 min'
    );
  });

  it('counts down to the end of the class in whole minutes, rounded up', () => {
    const countdown = sessionCountdown(
      session({ class_end: inMinutes(41.5), session_end: inMinutes(56.5) }),
      now
    );
    expect(countdown).toEqual({
      text: 'class ends in 42 min',
      warning: false,
      msLeft: 41.5 * MINUTE
    });
  });

  it('shows hours for a long session', () => {
    expect(
      sessionCountdown(session({ class_end: inMinutes(95) }), now)?.text
    ).toBe('class ends in 1 h 35 min');
  });

  it(`warns in the last ${WARNING_MINUTES} minutes, not before`, () => {
    const at = (minutes: number) =>
      sessionCountdown(session({ class_end: inMinutes(minutes) }), now)
        ?.warning;
    expect(at(10.01)).toBe(false);
    expect(at(10)).toBe(true);
    expect(at(3)).toBe(true);
  });

  it('counts down to the session end once the class is over (grace time)', () => {
    const countdown = sessionCountdown(
      session({ class_end: inMinutes(-2), session_end: inMinutes(8) }),
      now
    );
    expect(countdown?.text).toBe('session ends in 8 min');
    expect(countdown?.warning).toBe(true);
  });

  it('says "under a minute" at the very end', () => {
    expect(
      sessionCountdown(session({ class_end: inMinutes(0.5) }), now)?.text
    ).toBe('class ends in under a minute');
  });

  it('has no countdown outside a course session or after it', () => {
    expect(sessionCountdown(session(), now)).toBeNull();
    expect(
      sessionCountdown(
        session({ class_end: inMinutes(-30), session_end: inMinutes(-5) }),
        now
      )
    ).toBeNull();
  });

  it('ignores an end time it cannot read', () => {
    expect(
      sessionCountdown(
        session({ class_end: 'soon', session_end: inMinutes(20) }),
        now
      )?.text
    ).toBe('session ends in 20 min');
  });
});

describe('sessionStatusText, what the status bar item shows', () => {
  it('tells in the tooltip when the server stops', () => {
    const end = new Date(2024, 4, 6, 10, 50);
    const text = sessionStatusText(
      session({ session_end: end.toISOString() }),
      new Date(2024, 4, 6, 10, 0)
    );
    expect(text.gpu).toBe('GPU: 1/4 of an RTX 4090, 6 GiB');
    expect(text.countdown?.text).toBe('session ends in 50 min');
    expect(text.title).toBe(
      'Profile: ML101 lab\nGPU: 1/4 of an RTX 4090, 6 GiB\n' +
        `Your server stops at 10:50 ${zoneName(end)}: save your work before then, ` +
        'and run longer work as a job.'
    );
  });

  it('shows only the GPU outside a course session', () => {
    const text = sessionStatusText(
      session({ profile: null, gpu_share: null }),
      now
    );
    expect(text).toEqual({ gpu: 'No GPU', countdown: null, title: 'No GPU' });
  });
});
