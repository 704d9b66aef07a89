"""The OpenAI images API as the real `openai` SDK uses it, against `kiln serve` on the tiny model (started by
tests/cli/serve_openai.sh with --token, --default-size 80x64 and a models folder that also holds a broken
diffusion model file, broken.safetensors, whose jobs fail when they run).

Covers: x-should-retry on deterministic failures (the SDK sends a failed generation once), Idempotency-Key
(a retried request returns the first job, never a second; a key reused with another body is refused), errors
with `param` and readable messages without node ids or server paths, unknown models, size "auto",
output_format png/jpeg/webp with output_compression, stream with partial_images as server-sent events, signed
expiring url links under --token. Jobs are counted from /history (the job store).

Environment: KILN_URL, KILN_TOKEN, KILN_SCRATCH (the server's scratch folder: no error may name it),
the shell script runs test_timeout_* against a second server started with --request-timeout 1 and the
others against the main one (pytest -k).
"""
import base64
import concurrent.futures
import hashlib
import hmac
import os
import struct
import time
import urllib.parse
import uuid

import openai as _oa  # the SDK's own HTTP client class (httpx or httpx2, by SDK version)
import openai
import pytest
import requests

URL = os.environ["KILN_URL"]
TOKEN = os.environ["KILN_TOKEN"]
SCRATCH = os.environ["KILN_SCRATCH"]
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def png_size(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:16]
    return struct.unpack(">II", data[16:24])


def client(max_retries=0, requests_seen=None):
    hooks = {"request": [lambda req: requests_seen.append(req)]} if requests_seen is not None else {}
    return openai.OpenAI(base_url=f"{URL}/v1", api_key=TOKEN, max_retries=max_retries, timeout=120,
                         http_client=_oa.DefaultHttpxClient(event_hooks=hooks, timeout=120))


def n_jobs():
    return len(requests.get(f"{URL}/history", headers=AUTH, timeout=60).json())


def no_server_path(text):
    assert SCRATCH not in text and "/tmp/" not in text, text


def post(body, key=None, timeout=120):
    h = dict(AUTH)
    if key:
        h["Idempotency-Key"] = key
    return requests.post(f"{URL}/v1/images/generations", json=body, headers=h, timeout=timeout)


SMALL = {"size": "64x64", "num_inference_steps": 1}


def test_failed_generation_is_sent_once_and_makes_one_job():
    """The SDK retries 5xx unless told not to: a failed generation (deterministic) says x-should-retry: false."""
    before = n_jobs()
    seen = []
    with pytest.raises(openai.InternalServerError) as e:
        client(max_retries=3, requests_seen=seen).images.generate(model="broken", prompt="a fox", size="64x64",
                                                                   extra_body={"num_inference_steps": 1})
    assert len(seen) == 1, f"the SDK sent the failed request {len(seen)} times"
    assert e.value.response.headers.get("x-should-retry") == "false"
    assert e.value.code == "generation_failed"
    no_server_path(e.value.message)
    assert n_jobs() == before + 1
    hist = requests.get(f"{URL}/history", headers=AUTH, timeout=60).text
    no_server_path(hist)


def test_retried_failure_with_key_returns_first_job():
    before = n_jobs()
    key = "k-" + uuid.uuid4().hex
    body = {"model": "broken", "prompt": "a fox", **SMALL}
    r1 = post(body, key)
    r2 = post(body, key)
    assert r1.status_code == 500 and r2.status_code == 500, (r1.text, r2.text)
    assert r1.json() == r2.json()
    assert n_jobs() == before + 1


def test_idempotency_key_one_job_same_bytes():
    before = n_jobs()
    key = "k-" + uuid.uuid4().hex
    body = {"prompt": "a lighthouse", "seed": 5, **SMALL}
    with concurrent.futures.ThreadPoolExecutor(3) as ex:  # concurrent twins too
        rs = list(ex.map(lambda _: post(body, key), range(3)))
    assert all(r.status_code == 200 for r in rs), [r.text for r in rs]
    assert len({r.json()["data"][0]["b64_json"] for r in rs}) == 1
    assert n_jobs() == before + 1
    # through the SDK's own option
    # the SDK's own request (other bytes, same fields) with that key: the same job
    sdk = client().images.generate(prompt="a lighthouse", size="64x64", extra_headers={"Idempotency-Key": key},
                                   extra_body={"num_inference_steps": 1, "seed": 5})
    assert sdk.data[0].b64_json == rs[0].json()["data"][0]["b64_json"]
    assert n_jobs() == before + 1
    # a different body with the same key is refused, deterministically
    r = post({**body, "seed": 6}, key)
    assert r.status_code == 400 and r.json()["error"]["code"] == "idempotency_key_reused"
    assert r.headers.get("x-should-retry") == "false"
    assert n_jobs() == before + 1
    # no key: two jobs
    post(body), post(body)
    assert n_jobs() == before + 3


@pytest.mark.parametrize("body,param,words", [
    ({"prompt": "x", "size": "1000x1000"}, "size", "size must be between 64x64 and 2048x2048"),
    ({"prompt": "x", "size": "32x32"}, "size", "size must be between 64x64 and 2048x2048"),
    ({"prompt": "x", "size": "64x64 "}, "size", "size must be between"),
    ({"prompt": "   "}, "prompt", "prompt must not be empty"),
    ({"prompt": ""}, "prompt", "prompt must not be empty"),
    ({"size": "64x64"}, "prompt", "prompt is required"),
    ({"prompt": "x", "model": "dall-e-3"}, "model", "Invalid value: 'dall-e-3'. Supported values are: 'flux.2-klein-4b', 'broken', 'flux-2-klein-4b'"),
    ({"prompt": "x", "n": 99}, "n", "n must be an integer from 1 to 16"),
    ({"prompt": "x", "output_format": "gif"}, "output_format", "output_format must be one of 'png', 'jpeg' and 'webp'"),
    ({"prompt": "x", "output_compression": 101}, "output_compression", "output_compression must be an integer from 0 to 100"),
    ({"prompt": "x", "num_inference_steps": 0}, "num_inference_steps", "from 1 to"),
    ({"prompt": "x", "guidance_scale": -1}, "guidance_scale", "from 0 to 100"),
    ({"prompt": "x", "seed": -3}, "seed", "non-negative"),
    ({"prompt": "x", "partial_images": 4}, "partial_images", "from 0 to 3"),
    ({"prompt": "x", "background": "transparent"}, "background", "no transparent"),
    ({"prompt": "x", "stream": True, "response_format": "url"}, "response_format", "cannot be streamed"),
    ({"prompt": "x", "bogus": 1}, "bogus", "Unrecognized request argument supplied: bogus"),
])
def test_errors_name_the_param_in_words(body, param, words):
    before = n_jobs()
    r = post(body)
    assert r.status_code == 400, r.text
    e = r.json()["error"]
    assert e["param"] == param and words in e["message"], e
    assert e["type"] == "invalid_request_error"
    assert r.headers.get("x-should-retry") == "false"
    assert "node" not in e["message"] and "{" not in e["message"], e["message"]
    assert n_jobs() == before


def test_sdk_errors_carry_param():
    with pytest.raises(openai.BadRequestError) as e:
        client(max_retries=2).images.generate(prompt="x", model="gpt-image-1")
    assert e.value.param == "model" and e.value.code == "invalid_value"


def test_size_auto_and_model_stem():
    r = client().images.generate(model="flux-2-klein-4b", prompt="a fox", size="auto",
                                 extra_body={"num_inference_steps": 1, "seed": 2})
    assert png_size(base64.b64decode(r.data[0].b64_json)) == (80, 64)  # --default-size 80x64
    assert r.size == "80x64" and r.output_format == "png"
    r = client().images.generate(prompt="a fox", extra_body={"num_inference_steps": 1, "seed": 2})  # no size
    assert png_size(base64.b64decode(r.data[0].b64_json)) == (80, 64)


def test_output_formats_and_compression():
    def gen(fmt, comp=None):
        kw = {"output_compression": comp} if comp is not None else {}
        r = client().images.generate(prompt="a red fox in snow", size="128x128", output_format=fmt,
                                     extra_body={"num_inference_steps": 2, "seed": 9}, **kw)
        assert r.output_format == fmt
        return base64.b64decode(r.data[0].b64_json)

    assert png_size(gen("png")) == (128, 128)
    j90, j5 = gen("jpeg", 90), gen("jpeg", 5)
    assert j90[:3] == b"\xff\xd8\xff" and j5[:3] == b"\xff\xd8\xff"
    assert len(j5) < len(j90), (len(j5), len(j90))
    w_lossless, w10 = gen("webp"), gen("webp", 10)
    for w in (w_lossless, w10):
        assert w[:4] == b"RIFF" and w[8:12] == b"WEBP"
    assert w_lossless[12:16] == b"VP8L" and w10[12:16] == b"VP8 ", (w_lossless[12:16], w10[12:16])


def test_stream_partial_images():
    stream = client().images.generate(prompt="a castle", size="64x64", stream=True, partial_images=2,
                                      output_format="png", extra_body={"num_inference_steps": 4, "seed": 3})
    events = list(stream)
    kinds = [e.type for e in events]
    assert kinds == ["image_generation.partial_image"] * 2 + ["image_generation.completed"], kinds
    assert [e.partial_image_index for e in events[:2]] == [0, 1]
    for e in events:
        assert png_size(base64.b64decode(e.b64_json)) == (64, 64) and e.size == "64x64"
    # the completed image is the same as a plain request's
    plain = client().images.generate(prompt="a castle", size="64x64", extra_body={"num_inference_steps": 4, "seed": 3})
    assert events[-1].b64_json == plain.data[0].b64_json


def test_stream_failure_is_an_error_event():
    with pytest.raises(openai.APIError) as e:
        list(client().images.generate(model="broken", prompt="x", size="64x64", stream=True,
                                      extra_body={"num_inference_steps": 1}))
    assert "image generation failed" in e.value.message
    no_server_path(e.value.message)


def sign(filename, subfolder, typ, expires):
    key = hashlib.sha256(f"kiln-signed-url\n{TOKEN}".encode()).digest()
    msg = f"view\n{filename}\n{subfolder}\n{typ}\n{expires}".encode()
    return hmac.new(key, msg, hashlib.sha256).hexdigest()


def test_signed_url_works_without_token_and_expires():
    r = client().images.generate(prompt="a lighthouse", size="80x64", response_format="url", output_format="webp",
                                 extra_body={"num_inference_steps": 1, "seed": 3})
    url = r.data[0].url
    assert "sig=" in url and "expires=" in url and TOKEN not in url
    got = requests.get(url, timeout=30)  # no Authorization header
    assert got.status_code == 200 and got.content[8:12] == b"WEBP"
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlparse(url).query))
    base = f"{URL}/view"
    # the scheme is HMAC-SHA256 over the link's fields: a fresh signature works, an expired one does not
    ok = {**q, "expires": str(int(time.time()) + 60)}
    ok["sig"] = sign(ok["filename"], ok["subfolder"], ok["type"], ok["expires"])
    assert requests.get(base, params=ok, timeout=30).status_code == 200
    old = {**q, "expires": str(int(time.time()) - 1)}
    old["sig"] = sign(old["filename"], old["subfolder"], old["type"], old["expires"])
    assert requests.get(base, params=old, timeout=30).status_code == 401
    other = {**q, "filename": "other.png"}  # the signature covers the file name
    assert requests.get(base, params=other, timeout=30).status_code == 401
    later = {**q, "expires": str(int(q["expires"]) + 1000)}  # ... and the expiry
    assert requests.get(base, params=later, timeout=30).status_code == 401
    assert requests.get(base, params={k: v for k, v in q.items() if k != "sig"}, timeout=30).status_code == 401


def test_timeout_is_retried_with_key_and_makes_one_job():
    """--request-timeout 1 and a job that takes longer: the server answers 504 (retryable); the SDK retries
    with the same Idempotency-Key and gets the first job's image; the store holds one job."""
    before = n_jobs()
    seen = []
    key = "k-" + uuid.uuid4().hex
    r = client(max_retries=30, requests_seen=seen).images.generate(  # backoff caps at 8 s: ~4 min
        prompt="a slow fox", size="1024x1024", extra_headers={"Idempotency-Key": key},  # > 3 s on an idle
        extra_body={"num_inference_steps": 24, "seed": 4})  # AMX core (256x256 took 0.7 s there: too fast)
    assert png_size(base64.b64decode(r.data[0].b64_json)) == (1024, 1024)
    assert len(seen) >= 2, "the job finished within the 1 s request time-out: make it slower"
    assert n_jobs() == before + 1


def test_memory_refusal_is_a_400_sent_once():
    """kiln serve --memory-limit 0.05 (its own phase): a size the engine's memory plan refuses is the client's to
    change, so a 400 invalid_request_error that names the need (not a 500 server_error), never retried by the SDK;
    one job; a size that fits still succeeds on the same server."""
    before = n_jobs()
    seen = []
    with pytest.raises(openai.BadRequestError) as e:
        client(max_retries=3, requests_seen=seen).images.generate(prompt="a fox", size="1024x1024",
                                                                   extra_body={"num_inference_steps": 1})
    assert len(seen) == 1, f"the SDK sent the refused request {len(seen)} times"
    assert e.value.response.headers.get("x-should-retry") == "false"
    assert e.value.code == "request_refused", e.value.body
    assert "not enough memory" in e.value.message and "0.05 GB is available" in e.value.message, e.value.message
    no_server_path(e.value.message)
    assert n_jobs() == before + 1
    r = client().images.generate(prompt="a fox", size="64x64", extra_body={"num_inference_steps": 1})
    assert png_size(base64.b64decode(r.data[0].b64_json)) == (64, 64)
