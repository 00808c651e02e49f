#include <immintrin.h>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <random>
static float f(uint32_t u){float x;memcpy(&x,&u,4);return x;}
static uint32_t u(float x){uint32_t v;memcpy(&v,&x,4);return v;}
static float daz(float x){return std::fabs(x)<1.17549435e-38f? std::copysign(0.f,x):x;}
static float ftz(float x){return daz(x);}
static float emu(float acc,uint16_t a0,uint16_t a1,uint16_t b0,uint16_t b1,int mode){
  float x0=daz(f(uint32_t(a0)<<16)),x1=daz(f(uint32_t(a1)<<16)),y0=daz(f(uint32_t(b0)<<16)),y1=daz(f(uint32_t(b1)<<16));
  acc=daz(acc);
  if(mode==0){acc=ftz(std::fma(x1,y1,acc));acc=ftz(std::fma(x0,y0,acc));}
  else if(mode==1){acc=ftz(std::fma(x0,y0,acc));acc=ftz(std::fma(x1,y1,acc));}
  else {double s=(double)x0*y0+(double)x1*y1+acc; acc=ftz((float)s);}
  return acc;}
int main(int argc,char**argv){
  std::mt19937_64 g(42); long bad[3]={0,0,0}; long n=0;
  int spread=argc>1?atoi(argv[1]):20;
  for(long it=0;it<2000000;it++){
    alignas(64) uint16_t a[32],b[32]; alignas(64) float c[16],r[16];
    for(int i=0;i<32;i++){ float x=std::ldexp(std::uniform_real_distribution<float>(-1,1)(g),int(g()%(2*spread+1))-spread);
      uint32_t v=u(x); a[i]=v>>16; float y=std::ldexp(std::uniform_real_distribution<float>(-1,1)(g),int(g()%(2*spread+1))-spread); b[i]=u(y)>>16;
      if(g()%50==0) a[i]=g()&0xffff; if(g()%50==0) b[i]=g()&0xffff;}
    for(int i=0;i<16;i++){c[i]=std::ldexp(std::uniform_real_distribution<float>(-1,1)(g),int(g()%(2*spread+1))-spread); if(g()%30==0) c[i]=f(uint32_t(g()));}
    __m512 acc=_mm512_load_ps(c); __m512bh va,vb; memcpy(&va,a,64); memcpy(&vb,b,64);
    _mm512_store_ps(r,_mm512_dpbf16_ps(acc,va,vb));
    for(int i=0;i<16;i++){ n++; for(int m=0;m<3;m++){float e=emu(c[i],a[2*i],a[2*i+1],b[2*i],b[2*i+1],m);
      bool nan=std::isnan(e)&&std::isnan(r[i]); if(!nan && u(e)!=u(r[i])) bad[m]++;}}
  }
  printf("n=%ld mismatches: odd-first %ld, even-first %ld, single-round %ld\n",n,bad[0],bad[1],bad[2]);
}
