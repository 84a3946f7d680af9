#!/usr/bin/env python3
"""pytorch_pip_test.py: Kubeflow SDK's packages_to_install, as the PyTorch image's pip runs it,
for uid 1000 and for an arbitrary uid (OpenShift's: gid 0), with no image build.

Design: images/Dockerfile.pytorch cannot be built here (PyPI is out of reach), so its venv
and pip rules are rebuilt with Debian's own python3 (python3-venv, python3-pip) in the same
layout, from the Dockerfile's own lines: the venv at <root>/opt/venv made with the flags
its RUN line gives, then owned as its chown and chmod say; HOME is a folder made as the
kubelet makes an emptyDir (root's, 2777) and PATH has the venv first, as the image's ENV.
Then, as each uid (setpriv, no capabilities), the SDK's install for an MPI runtime
(kubeflow/sdk kubeflow/trainer/utils/utils.py get_script_for_python_packages:
`python -m pip install --quiet --no-warn-script-location ... --user PKG`), and the
system-wide install later SDKs try next; each must work and the package must import. The
package is a wheel made here (a wheel is a zip with its dist-info), installed with
--no-index. The negative: a venv made without --system-site-packages refuses --user
("User site-packages are not visible in this virtualenv"), as the image did.
usage: pytorch_pip_test.py   (as root, for setpriv)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PYTHON = "/usr/bin/python3"  # Debian's, as the image's base installs it
UIDS = ((1000, 1000), (1000870000, 0))  # the runtimes' uid; OpenShift's restricted SCC


def dockerfile_rules():
    with open(os.path.join(ROOT, "images", "Dockerfile.pytorch")) as stream:
        text = stream.read().replace("\\\n", " ")
    venv = re.search(r"python3 -m venv ((?:--\S+ )*)/opt/venv", text)
    chown = re.search(r"chown -R (\d+):(\d+) /opt/venv", text)
    chmod = re.search(r"chmod -R (\S+) /opt/venv", text)
    return (venv.group(1).split() if venv else []), (chown.groups() if chown else None), (chmod.group(1) if chmod else None)


def make_wheel(folder, name):
    path = os.path.join(folder, f"{name}-1.0-py3-none-any.whl")
    info = f"{name}-1.0.dist-info"
    files = {f"{name}.py": "VALUE = 42\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: pytorch_pip_test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{n},,\n" for n in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as wheel:
        for member, content in files.items():
            wheel.writestr(member, content)
    return path


class Layout:
    def __init__(self, tmp, venv_flags, owner, mode):
        self.venv = os.path.join(tmp, "opt", "venv")
        subprocess.run([PYTHON, "-m", "venv", *venv_flags, self.venv], check=True)
        if owner:
            subprocess.run(["chown", "-R", f"{owner[0]}:{owner[1]}", self.venv], check=True)
        if mode:
            subprocess.run(["chmod", "-R", mode, self.venv], check=True)
        os.chmod(tmp, 0o755)
        os.makedirs(os.path.join(tmp, "opt"), exist_ok=True)
        os.chmod(os.path.join(tmp, "opt"), 0o755)
        self.tmp = tmp

    def run(self, uid, gid, home, *argv):
        env = {"PATH": f"{self.venv}/bin:/usr/bin:/bin", "HOME": home, "PIP_DISABLE_PIP_VERSION_CHECK": "1",
               "PIP_NO_CACHE_DIR": "1"}
        cmd = ["setpriv", "--reuid", str(uid), "--regid", str(gid), "--clear-groups", "--inh-caps", "-all",
               "--bounding-set", "-all", "--no-new-privs", *argv]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)

    def home(self, uid):
        home = os.path.join(self.tmp, f"home-{uid}")
        os.mkdir(home)
        os.chmod(home, 0o2777)  # an emptyDir, as the kubelet makes it
        return home


def sdk_install(layout, uid, gid, home, wheel, user):
    # The SDK's line for an MPI runtime (--user), or a later SDK's system-wide retry.
    argv = ["python", "-m", "pip", "install", "--quiet", "--no-warn-script-location", "--no-index"]
    return layout.run(uid, gid, home, *argv, *(["--user"] if user else []), wheel)


class PytorchPip(unittest.TestCase):
    def setUp(self):
        self.assertEqual(os.geteuid(), 0, "run it as root: setpriv takes each uid")

    def test_the_dockerfile_has_the_rules(self):
        flags, owner, mode = dockerfile_rules()
        self.assertIn("--system-site-packages", flags, "pip refuses --user in a venv that hides the user site")
        self.assertEqual(owner, ("1000", "0"))
        self.assertEqual(mode, "g=u")

    def test_the_sdks_installs_work_for_each_uid(self):
        flags, owner, mode = dockerfile_rules()
        with tempfile.TemporaryDirectory() as tmp:
            layout = Layout(tmp, flags, owner, mode)
            for uid, gid in UIDS:
                for user in (True, False):
                    name = f"tmpi_demo_{uid}_{'user' if user else 'venv'}"
                    wheel = make_wheel(tmp, name)
                    os.chmod(wheel, 0o644)
                    home = layout.home(f"{uid}-{user}")
                    done = sdk_install(layout, uid, gid, home, wheel, user)
                    self.assertEqual(done.returncode, 0, f"uid {uid}, --user {user}: {done.stderr}")
                    check = layout.run(uid, gid, home, "python", "-c", f"import {name}; print({name}.VALUE, {name}.__file__)")
                    self.assertEqual(check.returncode, 0, check.stderr)
                    where = check.stdout.split()[1]
                    self.assertTrue(where.startswith(home if user else layout.venv), f"{name} is in {where}")

    def test_a_venv_without_the_system_site_refuses_user(self):
        with tempfile.TemporaryDirectory() as tmp:
            layout = Layout(tmp, [], ("1000", "0"), "g=u")
            wheel = make_wheel(tmp, "tmpi_demo_refused")
            os.chmod(wheel, 0o644)
            done = sdk_install(layout, 1000, 1000, layout.home("refused"), wheel, user=True)
            self.assertNotEqual(done.returncode, 0)
            self.assertIn("User site-packages are not visible in this virtualenv", done.stderr)
        self.assertTrue(shutil.which("setpriv"))


if __name__ == "__main__":
    unittest.main()
